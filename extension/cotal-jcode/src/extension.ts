/**
 * The connector object the Cotal manager loads: its declarations (read before anything is
 * provisioned) and `buildLaunch`, which returns the launch of `jucode-cotal-jcode` that the
 * repository's README describes.
 */

import { execFileSync } from "node:child_process";
import { accessSync, constants, readFileSync, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import type { Connector, LaunchOpts, LaunchSpec, ModelCatalog, ModelInfo } from "./contract.js";
import { identityEnv, launchEnv, writeLaunchDir, type LaunchMaterial } from "./launch-env.js";
import { refuse, refuseLaunch } from "./refusals.js";
import { readResumeRecord, resumeRecordPath, seatHome } from "./seat-home.js";

/** The connector's name: `cotal spawn --agent jcode-rs`. `jcode` stays Cotal's own connector. */
export const CONNECTOR_NAME = "jcode-rs";
/** The connector binary, found through the manager's boot inventory or PATH. */
export const SEAT_BINARY = "jucode-cotal-jcode";
/** Readiness bound the seat itself keeps (`jucode_jcode::harness::READINESS_TIMEOUT`, 180 s). */
export const JCODE_READINESS_TIMEOUT_MS = 180_000;
/** The manager keeps a resume title of at most this many characters. */
export const MAX_TITLE_CHARS = 1024;
/** The on/off spellings `COTAL_JCODE_TUI` takes (`jucode_jcode::harness::tui_mode`). */
export const TUI_SPELLINGS = ["1", "0", "true", "false", "on", "off", "yes", "no"] as const;

/** Where the launch is built: the process environment, cwd and platform (injected in tests). */
export interface BuildContext {
  env: NodeJS.ProcessEnv;
  cwd: string;
  platform: NodeJS.Platform;
  /** Base directory for the launch's private directory. */
  tmpdir?: string;
}

function hostContext(): BuildContext {
  return { env: process.env, cwd: process.cwd(), platform: process.platform };
}

/** `name` on `PATH`, as an absolute path of an executable file. */
export function findOnPath(name: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? "").split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const p = join(dir, name);
    try {
      if (statSync(p).isFile()) {
        accessSync(p, constants.X_OK);
        return p;
      }
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** The operator's own jcode home (`JCODE_HOME`, else `~/.jcode`): the `--resume` source. */
export function operatorJcodeHome(env: NodeJS.ProcessEnv): string | undefined {
  if (env.JCODE_HOME) return env.JCODE_HOME;
  return env.HOME ? join(env.HOME, ".jcode") : undefined;
}

const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;

function titleOf(v: unknown): string | undefined {
  if (!v || typeof v !== "object") return undefined;
  const o = v as Record<string, unknown>;
  const t = typeof o.custom_title === "string" ? o.custom_title : o.title;
  return typeof t === "string" ? t : undefined;
}

/**
 * Refuse before launch a `--resume` the seat would refuse: a malformed id, a source with no
 * readable snapshot, a title the manager cannot keep, or a seat that already forked another
 * session. A seat that already owns its fork of this id continues it without the source.
 * The seat checks the transcript itself, field by field, before its instance starts.
 */
export function preflightResume(home: string, resumeHome: string | undefined, id: string): void {
  if (!SESSION_ID.test(id)) refuseLaunch(`--resume ${JSON.stringify(id)} is not a jcode session id`);
  const rec = readResumeRecord(resumeRecordPath(home));
  if (rec && rec.source_session_id !== id)
    refuseLaunch(`this seat already forked ${rec.source_session_id}; spawn a new name to fork ${id}`);
  if (rec) {
    try {
      statSync(join(home, "sessions", `${rec.fork_session_id}.json`));
      return;
    } catch {
      // The recorded fork is gone: the seat forks again, from the source.
    }
  }
  if (!resumeHome) refuseLaunch("--resume needs the operator's jcode home (JCODE_HOME or HOME)");
  const snap = join(resumeHome, "sessions", `${id}.json`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(snap, "utf8"));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    refuseLaunch(`--resume ${id}: no readable transcript at ${snap}${code ? ` (${code})` : " (not JSON)"}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
    refuseLaunch(`--resume ${id}: ${snap} is not a jcode session snapshot`);
  let title = titleOf(parsed);
  // A journal's meta can retitle the session after the snapshot.
  try {
    for (const line of readFileSync(join(resumeHome, "sessions", `${id}.journal.jsonl`), "utf8").split("\n")) {
      if (!line.trim()) continue;
      try {
        title = titleOf((JSON.parse(line) as { meta?: unknown }).meta) ?? title;
      } catch {
        // A torn last line; the seat reads the journal strictly.
      }
    }
  } catch {
    // No journal: the snapshot is the whole session.
  }
  if (title !== undefined && Array.from(title).length > MAX_TITLE_CHARS)
    refuseLaunch(`--resume ${id}: its title is longer than ${MAX_TITLE_CHARS} characters, which the manager cannot keep`);
}

/** Build the launch with an explicit context (tests); `buildLaunch` uses this process's. */
export function buildLaunchIn(opts: LaunchOpts, ctx: BuildContext): LaunchSpec {
  // Refusals first: nothing is written for a launch that is refused.
  if (ctx.platform === "win32")
    refuseLaunch("Windows is not supported: jcode's Harness API bridge is a Unix-socket surface");
  if (opts.continueSession !== undefined) refuse("exact-session", `session ${opts.continueSession}`);
  if (opts.mcpServers && Object.keys(opts.mcpServers).length > 0)
    refuse("share-tools", `servers: ${Object.keys(opts.mcpServers).sort().join(", ")}`);
  if (opts.launchOptions && Object.keys(opts.launchOptions).length > 0)
    refuse("launch-options", `first option: ${Object.keys(opts.launchOptions)[0]}`);
  if (!opts.space || !opts.name) refuseLaunch("a launch needs a space and a name");
  if (opts.creds && opts.userAuth) refuseLaunch("a .creds file and user auth are given together");
  if (opts.userAuth && opts.id) refuseLaunch("user auth carries its own principal; an id is given too");
  if (opts.userAuth && !opts.userAuth.bearerCmd.length) refuseLaunch("the user-auth bearer command is empty");
  if ((opts.creds || opts.userAuth) && !opts.lifecycleUid)
    refuseLaunch("an authenticated launch needs a lifecycle uid");

  const command =
    opts.resolvedBinaries?.[SEAT_BINARY] ?? ctx.env.JUCODE_COTAL_JCODE_BIN ?? findOnPath(SEAT_BINARY, ctx.env.PATH);
  if (!command) refuseLaunch(`${SEAT_BINARY} is not on PATH (or set JUCODE_COTAL_JCODE_BIN)`);
  if (!isAbsolute(command)) refuseLaunch(`${SEAT_BINARY} must be an absolute path, got ${command}`);

  const workspace = opts.workspaceRoot ?? ctx.cwd;
  if (!isAbsolute(workspace)) refuseLaunch(`the workspace root must be absolute, got ${workspace}`);
  const home = seatHome(workspace, opts.space, opts.name);

  // The TUI decision belongs to the process building the launch (the manager for a detached seat).
  const tui = ctx.env.COTAL_JCODE_TUI?.trim();
  if (tui && !(TUI_SPELLINGS as readonly string[]).includes(tui))
    refuseLaunch(`COTAL_JCODE_TUI=${JSON.stringify(tui)} is not one of ${TUI_SPELLINGS.join(", ")}`);

  let prompt: string | undefined;
  if (opts.prompt !== undefined) {
    prompt = opts.prompt.trim();
    if (!prompt) refuseLaunch("an initial prompt was given but it is empty");
  }
  let variant: string | undefined;
  if (opts.variant !== undefined) {
    variant = opts.variant.trim();
    if (!variant) refuseLaunch("a model variant was given but it is empty");
  }
  const model = opts.model?.trim();
  if (opts.model !== undefined && !model) refuseLaunch("a model was given but it is empty");

  const armed = opts.events !== false || opts.eventsRequired === true;
  if (armed && !opts.workspaceRoot) refuseLaunch("the event plane needs a workspace root for its write-ahead log");

  let resumeHome: string | undefined;
  if (opts.resume !== undefined) {
    resumeHome = operatorJcodeHome(ctx.env);
    preflightResume(home, resumeHome, opts.resume);
  }

  // Identity and grants can still be refused (a list entry with a comma): before any file.
  const env: Record<string, string> = { ...launchEnv(ctx.env, opts.envAllow), ...identityEnv(opts) };
  if (opts.configPath) env.COTAL_AGENT_FILE = resolve(ctx.cwd, opts.configPath);
  if (model) env.COTAL_MODEL = model;
  if (variant) env.COTAL_VARIANT = variant;
  if (armed) {
    env.COTAL_EVENTS = "1";
    env.COTAL_WORKSPACE_ROOT = workspace;
  }
  env.COTAL_JCODE_HOME = workspace;
  if (opts.resolvedBinaries?.jcode) env.COTAL_JCODE_BIN = opts.resolvedBinaries.jcode;
  if (tui) env.COTAL_JCODE_TUI = tui;
  if (prompt) env.COTAL_JCODE_PROMPT = prompt;
  if (opts.resume !== undefined && resumeHome) {
    env.COTAL_JCODE_RESUME = opts.resume;
    env.COTAL_JCODE_RESUME_HOME = resumeHome;
  }

  const material: Omit<LaunchMaterial, "controlToken"> = {};
  if (opts.servers) {
    const servers = opts.servers.split(",").map((s) => s.trim()).filter(Boolean);
    if (servers.length) material.servers = servers;
  }
  if (opts.creds) material.creds = opts.creds;
  if (opts.userAuth) material.userAuth = { ...opts.userAuth, bearerCmd: [...opts.userAuth.bearerCmd] };
  if (opts.eventsRequired !== undefined) material.eventsRequired = opts.eventsRequired;
  const launch = writeLaunchDir(material, ctx.tmpdir);
  env.COTAL_CONTROL_SOCKET = launch.control.path;
  env.COTAL_LAUNCH_MATERIAL = launch.materialPath;

  const spec: LaunchSpec = {
    command,
    args: armed ? [] : ["--no-events"],
    env,
    control: launch.control,
    artifacts: [launch.dir],
  };
  const record = resumeRecordPath(home);
  if (opts.resume !== undefined || readResumeRecord(record)) spec.resumeRecordPath = record;
  return spec;
}

/**
 * `cotal models --agent jcode-rs`: the catalog the operator's jcode `config.toml` declares, read
 * by the seat binary (`jucode-cotal-jcode models --json`, the same parser a launch uses) so the
 * two never disagree. Each tier's options say it is declared, not provider-verified. Fails loud
 * (throws) when the binary is missing or refuses the file; `refresh` changes nothing, since this
 * is a local declaration and never a live probe.
 */
export function listModelsIn(ctx: BuildContext): ModelCatalog {
  const command = ctx.env.JUCODE_COTAL_JCODE_BIN ?? findOnPath(SEAT_BINARY, ctx.env.PATH);
  if (!command) throw new Error(`${SEAT_BINARY} is not on PATH (or set JUCODE_COTAL_JCODE_BIN)`);
  let out: string;
  try {
    out = execFileSync(command, ["models", "--json"], {
      env: ctx.env,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 20_000,
    });
  } catch (e) {
    const stderr = (e as { stderr?: string }).stderr?.trim();
    throw new Error(`jcode model catalog: ${stderr || String(e)}`);
  }
  return parseCatalog(out);
}

/** The binary's JSON, checked field by field before the manager sees it. */
export function parseCatalog(text: string): ModelCatalog {
  const v = JSON.parse(text) as unknown;
  const bad = (why: string): never => {
    throw new Error(`jcode model catalog: ${why}`);
  };
  if (!v || typeof v !== "object" || Array.isArray(v)) bad("not an object");
  const o = v as Record<string, unknown>;
  if (typeof o.source !== "string") bad("no source");
  if (!Array.isArray(o.models)) bad("no models list");
  const models = (o.models as unknown[]).map((m, i): ModelInfo => {
    const r = (m ?? {}) as Record<string, unknown>;
    if (typeof r.id !== "string" || !r.id) bad(`models[${i}].id is missing`);
    if (typeof r.provider !== "string") bad(`models[${i}].provider is missing`);
    const info: ModelInfo = { id: r.id as string, provider: r.provider as string };
    if (r.variants !== undefined) {
      if (!Array.isArray(r.variants)) bad(`models[${i}].variants is not a list`);
      info.variants = (r.variants as unknown[]).map((x, j) => {
        const t = (x ?? {}) as Record<string, unknown>;
        if (typeof t.name !== "string" || !t.name) bad(`models[${i}].variants[${j}].name is missing`);
        const opts = (t.options ?? {}) as Record<string, unknown>;
        return { name: t.name as string, options: { ...opts } };
      });
    }
    return info;
  });
  return { source: o.source as string, models };
}

/** The Cotal connector for the Rust jcode seat. */
export const jcodeRsConnector: Connector = {
  kind: "connector",
  name: CONNECTOR_NAME,
  requires: ["jcode", SEAT_BINARY],
  readinessTimeoutMs: JCODE_READINESS_TIMEOUT_MS,
  supportsResume: true,
  supportsSessionContinuation: false,
  supportsFreshStart: true,
  supportsModelVariant: true,
  supportsPrompt: true,
  // The seat's MCP bridge sends no tools/list_changed, so a connection change must be refused.
  supportsToolListAnnounce: false,
  eventChannel: ({ owner, actor }) => `events.${owner}.${actor}`,
  launchHint: "starting a private jcode instance and proving cotal_orientation before joining (up to 3 minutes)",
  buildLaunch: (opts) => buildLaunchIn(opts, hostContext()),
  listModels: () => listModelsIn(hostContext()),
};
