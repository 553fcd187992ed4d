import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { LaunchOpts } from "../src/contract.js";
import { buildLaunchIn, CONNECTOR_NAME, jcodeRsConnector, JCODE_READINESS_TIMEOUT_MS } from "../src/extension.js";
import { LaunchRefused, REFUSALS, type RefusalKey } from "../src/refusals.js";
import { seatHome } from "../src/seat-home.js";
import { ContractManager, GENERIC_READINESS_MS, ManagerRefusal } from "./manager.js";
import { fixture, sandbox, type Sandbox } from "./support.js";

interface RefusalFixture {
  prefix: string;
  exitCode: number;
  refusals: Record<RefusalKey, { message: string; args: string[] }>;
}
const REFUSAL_FIXTURE = fixture<RefusalFixture>("refusals.json");

function base(sb: Sandbox, extra: Partial<LaunchOpts> = {}): LaunchOpts {
  return { space: "dev", name: "alice", workspaceRoot: sb.workspace, ...extra };
}

function mode(p: string): number {
  return statSync(p).mode & 0o777;
}

describe("declarations the manager reads before provisioning", () => {
  it("declare the readiness window, the binaries and the capabilities", () => {
    assert.equal(jcodeRsConnector.kind, "connector");
    assert.equal(jcodeRsConnector.name, CONNECTOR_NAME);
    assert.notEqual(jcodeRsConnector.name, "jcode", "Cotal's own connector keeps its name");
    assert.equal(jcodeRsConnector.readinessTimeoutMs, 180_000);
    assert.equal(JCODE_READINESS_TIMEOUT_MS, 180_000);
    assert.deepEqual(jcodeRsConnector.requires, ["jcode", "jucode-cotal-jcode"]);
    assert.equal(jcodeRsConnector.supportsSessionContinuation, false);
    assert.equal(jcodeRsConnector.supportsResume, true);
    assert.equal(jcodeRsConnector.supportsModelVariant, true);
    assert.equal(jcodeRsConnector.supportsPrompt, true);
    assert.equal(jcodeRsConnector.supportsToolListAnnounce, false, "the bridge announces no tool-list change");
    assert.equal(jcodeRsConnector.eventChannel?.({ owner: "local", actor: "alice" }), "events.local.alice");
  });

  it("the manager waits the declared window, not its generic one", () => {
    const m = new ContractManager(jcodeRsConnector, {});
    assert.equal(m.readinessMs(), 180_000);
    assert.ok(m.readinessMs() > GENERIC_READINESS_MS);
    const bad = new ContractManager({ ...jcodeRsConnector, readinessTimeoutMs: 1.5 }, {});
    assert.throws(() => bad.readinessMs(), ManagerRefusal);
  });

  it("a missing binary is refused by the manager's PATH preflight", () => {
    const sb = sandbox();
    const m = new ContractManager(jcodeRsConnector, { jcode: sb.jcodeBin });
    assert.throws(() => m.spawn(base(sb)), /jucode-cotal-jcode is not on PATH/);
    assert.equal(m.buildCalls, 0);
  });
});

describe("buildLaunch: the launch the README describes", () => {
  it("an events-armed seat: command, no arguments, the exact environment, the control endpoint", () => {
    const sb = sandbox();
    const opts = base(sb, {
      role: "reviewer",
      id: "UABC",
      creds: "/creds/alice.creds",
      lifecycleUid: "abcdefghijklmnopqrstuvwxyz",
      managerInstance: "mgr-1",
      servers: "nats://127.0.0.1:4222, nats://127.0.0.1:4223",
      subscribe: ["general", "dev.review"],
      allowSubscribe: ["general", "dev.*"],
      allowPublish: ["general"],
      capabilities: ["spawn", "run"],
      quiet: ["random"],
      muted: ["noise"],
      model: "gpt-5.6-sol",
      variant: "high",
      prompt: "  Review the change.  ",
      configPath: ".cotal/agents/alice.md",
      eventsRequired: true,
      resolvedBinaries: { jcode: sb.jcodeBin, "jucode-cotal-jcode": sb.seatBin },
    });
    const spec = buildLaunchIn(opts, sb.ctx({ LANG: "C.UTF-8", SECRET_AMBIENT: "x", COTAL_SPACE: "other" }));
    assert.equal(spec.command, sb.seatBin);
    assert.deepEqual(spec.args, []);
    const [dir] = spec.artifacts ?? [];
    assert.ok(dir);
    assert.deepEqual(spec.control, { path: join(dir, "control.sock"), token: spec.control?.token });
    assert.match(spec.control?.token ?? "", /^[0-9a-f]{64}$/);
    assert.deepEqual(spec.env, {
      PATH: sb.bin,
      HOME: sb.operatorHome,
      LANG: "C.UTF-8",
      COTAL_SPACE: "dev",
      COTAL_NAME: "alice",
      COTAL_ROLE: "reviewer",
      COTAL_ID: "UABC",
      COTAL_LIFECYCLE_UID: "abcdefghijklmnopqrstuvwxyz",
      COTAL_MANAGER_INSTANCE: "mgr-1",
      COTAL_SUBSCRIBE: "general,dev.review",
      COTAL_ALLOW_SUBSCRIBE: "general,dev.*",
      COTAL_ALLOW_PUBLISH: "general",
      COTAL_CAPABILITIES: "spawn,run",
      COTAL_QUIET: "random",
      COTAL_MUTED: "noise",
      COTAL_AGENT_FILE: join(sb.workspace, ".cotal/agents/alice.md"),
      COTAL_MODEL: "gpt-5.6-sol",
      COTAL_VARIANT: "high",
      COTAL_EVENTS: "1",
      COTAL_WORKSPACE_ROOT: sb.workspace,
      COTAL_JCODE_HOME: sb.workspace,
      COTAL_JCODE_BIN: sb.jcodeBin,
      COTAL_JCODE_PROMPT: "Review the change.",
      COTAL_CONTROL_SOCKET: join(dir, "control.sock"),
      COTAL_LAUNCH_MATERIAL: join(dir, "launch-material.json"),
    });
    assert.equal(spec.resumeRecordPath, undefined, "no fork, no resume record");
  });

  it("secrets travel only in an owner-only launch-material file", () => {
    const sb = sandbox();
    const spec = buildLaunchIn(
      base(sb, {
        servers: "nats://h:1",
        userAuth: { owner: "u_x", actor: "a", sentinelCredsPath: "/s.creds", bearerCmd: ["bearer", "--now"] },
        lifecycleUid: "abcdefghijklmnopqrstuvwxyz",
        eventsRequired: false,
      }),
      sb.ctx(),
    );
    const material = spec.env?.COTAL_LAUNCH_MATERIAL ?? "";
    const [dir] = spec.artifacts ?? [];
    assert.equal(mode(dir ?? ""), 0o700);
    assert.equal(mode(material), 0o600);
    assert.deepEqual(JSON.parse(readFileSync(material, "utf8")), {
      servers: ["nats://h:1"],
      userAuth: { owner: "u_x", actor: "a", sentinelCredsPath: "/s.creds", bearerCmd: ["bearer", "--now"] },
      eventsRequired: false,
      controlToken: spec.control?.token,
    });
    const blob = JSON.stringify(spec.env);
    assert.ok(!blob.includes(spec.control?.token ?? "-"), "the control token is not in the environment");
    assert.ok(!blob.includes("bearer"), "the bearer command is not in the environment");
  });

  it("--no-events opts out, unless the registration requires events", () => {
    const sb = sandbox();
    const off = buildLaunchIn(base(sb, { events: false }), sb.ctx());
    assert.deepEqual(off.args, ["--no-events"]);
    assert.equal(off.env?.COTAL_EVENTS, undefined);
    assert.equal(off.env?.COTAL_WORKSPACE_ROOT, undefined);
    const required = buildLaunchIn(base(sb, { events: false, eventsRequired: true }), sb.ctx());
    assert.deepEqual(required.args, []);
    assert.equal(required.env?.COTAL_EVENTS, "1");
    assert.throws(() => buildLaunchIn({ space: "dev", name: "a" }, sb.ctx()), /workspace root/);
  });

  it("the base environment is an allow-list plus the declared extras", () => {
    const sb = sandbox();
    const spec = buildLaunchIn(
      base(sb, { events: false, envAllow: ["MY_TOOL_HOME"] }),
      sb.ctx({ MY_TOOL_HOME: "/t", OTHER: "no", COTAL_HOME: "/c", COTAL_NAME: "mallory", JCODE_HOME: "/j" }),
    );
    assert.equal(spec.env?.MY_TOOL_HOME, "/t");
    assert.equal(spec.env?.COTAL_HOME, "/c", "operator knobs are kept");
    assert.equal(spec.env?.JCODE_HOME, "/j", "the operator's jcode home, for credential inheritance");
    assert.equal(spec.env?.OTHER, undefined);
    assert.equal(spec.env?.COTAL_NAME, "alice", "identity comes from the launch, never the ambient env");
  });

  it("COTAL_JCODE_TUI from the building process: forwarded when on/off, refused otherwise", () => {
    const sb = sandbox();
    assert.equal(buildLaunchIn(base(sb), sb.ctx({ COTAL_JCODE_TUI: "0" })).env?.COTAL_JCODE_TUI, "0");
    assert.equal(buildLaunchIn(base(sb), sb.ctx()).env?.COTAL_JCODE_TUI, undefined);
    assert.throws(() => buildLaunchIn(base(sb), sb.ctx({ COTAL_JCODE_TUI: "maybe" })), /COTAL_JCODE_TUI="maybe" is not one of/);
  });

  it("the binary comes from the manager's inventory, then JUCODE_COTAL_JCODE_BIN, then PATH", () => {
    const sb = sandbox();
    assert.equal(buildLaunchIn(base(sb), sb.ctx()).command, sb.seatBin);
    assert.equal(buildLaunchIn(base(sb), sb.ctx({ JUCODE_COTAL_JCODE_BIN: "/opt/seat" })).command, "/opt/seat");
    assert.throws(() => buildLaunchIn(base(sb), { ...sb.ctx(), env: { PATH: "/nonexistent" } }), /jucode-cotal-jcode is not on PATH/);
  });

  it("empty prompts, variants and models, lists that cannot travel, Windows: refused", () => {
    const sb = sandbox();
    assert.throws(() => buildLaunchIn(base(sb, { prompt: "  " }), sb.ctx()), /initial prompt was given but it is empty/);
    assert.throws(() => buildLaunchIn(base(sb, { variant: "" }), sb.ctx()), /variant was given but it is empty/);
    assert.throws(() => buildLaunchIn(base(sb, { model: " " }), sb.ctx()), /model was given but it is empty/);
    assert.throws(() => buildLaunchIn(base(sb, { subscribe: ["a,b"] }), sb.ctx()), /cannot travel in a comma list/);
    assert.throws(() => buildLaunchIn(base(sb, { creds: "/c", lifecycleUid: undefined as never }), sb.ctx()), /lifecycle uid/);
    assert.throws(() => buildLaunchIn(base(sb), { ...sb.ctx(), platform: "win32" }), /Windows is not supported/);
    assert.deepEqual(readdirSync(sb.launches), [], "a refused launch writes nothing");
  });
});

describe("what fails loud, before launch", () => {
  const cases: [RefusalKey, Partial<LaunchOpts>][] = [
    ["exact-session", { continueSession: "session_live_1" }],
    ["share-tools", { mcpServers: { filesystem: { command: "fs-mcp" } } }],
    ["launch-options", { launchOptions: { effort: "high" } }],
  ];
  for (const [key, extra] of cases) {
    it(`${key}: refused with the fixture's text, nothing written`, () => {
      assert.equal(REFUSALS[key], REFUSAL_FIXTURE.refusals[key].message);
      const sb = sandbox();
      assert.throws(
        () => buildLaunchIn(base(sb, extra), sb.ctx()),
        (e: unknown) => e instanceof LaunchRefused && e.key === key && e.message.startsWith(REFUSAL_FIXTURE.refusals[key].message),
      );
      assert.deepEqual(readdirSync(sb.launches), []);
    });
  }

  it("the manager's preflight refuses exact-session continuation before buildLaunch", () => {
    const sb = sandbox();
    const m = new ContractManager(jcodeRsConnector, { jcode: sb.jcodeBin, "jucode-cotal-jcode": sb.seatBin });
    assert.throws(() => m.spawn(base(sb, { continueSession: "s1" })), /cannot continue an exact session/);
    assert.equal(m.buildCalls, 0);
  });

  it("share-tools and --opt pass the manager's preflight and are refused by buildLaunch", () => {
    const sb = sandbox();
    const m = new ContractManager(jcodeRsConnector, { jcode: sb.jcodeBin, "jucode-cotal-jcode": sb.seatBin });
    assert.throws(() => m.spawn(base(sb, { mcpServers: { a: {} } })), LaunchRefused);
    assert.throws(() => m.spawn(base(sb, { launchOptions: { x: 1 } })), LaunchRefused);
    assert.equal(m.buildCalls, 2);
    // Empty ones are no request at all.
    m.spawn(base(sb, { mcpServers: {}, launchOptions: {} }));
  });
});

describe("a full spawn through the manager's contract", () => {
  it("mints the event grant, resolves both binaries and passes the manager's checks", () => {
    const sb = sandbox();
    const m = new ContractManager(jcodeRsConnector, { jcode: sb.jcodeBin, "jucode-cotal-jcode": sb.seatBin });
    const out = m.spawn(base(sb, { allowPublish: ["general"] }));
    assert.equal(out.readinessMs, 180_000);
    assert.equal(out.spec.command, sb.seatBin);
    assert.equal(out.spec.env?.COTAL_JCODE_BIN, sb.jcodeBin);
    assert.equal(out.spec.env?.COTAL_ALLOW_PUBLISH, "general,events.local.alice");
  });
});

describe("--resume: the fork, its record and what the manager reads", () => {
  function source(sb: Sandbox, id: string, title: string, journalTitle?: string): void {
    const dir = join(sb.operatorHome, ".jcode", "sessions");
    writeFileSync(join(dir, `${id}.json`), JSON.stringify({ id, title, messages: [] }));
    if (journalTitle !== undefined)
      writeFileSync(join(dir, `${id}.journal.jsonl`), `${JSON.stringify({ meta: { custom_title: journalTitle } })}\n{"torn`);
  }

  it("a readable source: the seat is told where to fork from, and the record path is declared", () => {
    const sb = sandbox();
    source(sb, "session_src_1", "Parser work");
    const spec = buildLaunchIn(base(sb, { resume: "session_src_1" }), sb.ctx());
    assert.equal(spec.env?.COTAL_JCODE_RESUME, "session_src_1");
    assert.equal(spec.env?.COTAL_JCODE_RESUME_HOME, join(sb.operatorHome, ".jcode"));
    assert.equal(spec.resumeRecordPath, join(seatHome(sb.workspace, "dev", "alice"), "cotal-resume.json"));
  });

  it("a missing source, a bad id or an over-long title is refused before launch", () => {
    const sb = sandbox();
    assert.throws(() => buildLaunchIn(base(sb, { resume: "session_none" }), sb.ctx()), /no readable transcript/);
    assert.throws(() => buildLaunchIn(base(sb, { resume: "../etc" }), sb.ctx()), /is not a jcode session id/);
    source(sb, "session_long", "short", "t".repeat(1025));
    assert.throws(() => buildLaunchIn(base(sb, { resume: "session_long" }), sb.ctx()), /longer than 1024 characters/);
    source(sb, "session_ok", "t".repeat(1024));
    buildLaunchIn(base(sb, { resume: "session_ok" }), sb.ctx());
    assert.equal(readdirSync(sb.launches).length, 1, "only the accepted launch wrote its directory");
  });

  it("a relaunch continues the recorded fork without the source; another source is refused", () => {
    const sb = sandbox();
    const home = seatHome(sb.workspace, "dev", "alice");
    mkdirSync(join(home, "sessions"), { recursive: true });
    const rec = fixture<Record<string, string>>("resume-record.json");
    writeFileSync(join(home, "cotal-resume.json"), JSON.stringify(rec));
    writeFileSync(join(home, "sessions", `${rec.fork_session_id}.json`), "{}");
    const m = new ContractManager(jcodeRsConnector, { jcode: sb.jcodeBin, "jucode-cotal-jcode": sb.seatBin });
    const out = m.spawn(base(sb, { resume: rec.source_session_id }));
    assert.deepEqual(out.resume, {
      forkedFrom: rec.source_session_id,
      title: rec.title,
      sha256: rec.sha256,
      session: rec.fork_session_id,
      forkedAt: rec.forked_at,
    });
    // Without --resume the record is still declared: the seat keeps its fork.
    assert.equal(m.spawn(base(sb)).resume?.forkedFrom, rec.source_session_id);
    assert.throws(() => m.spawn(base(sb, { resume: "session_other" })), /already forked session_1700000000000_abcdef/);
  });
});
