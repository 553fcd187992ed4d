// The gateway switch of a Claude Code session (the fake Claude CLI of jucode-fake-engines,
// built in the same target directory): signed in to a JuCode account, the page moves the
// session onto the gateway and the list's flag follows.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DESKTOP, assert, bin, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "../../fixtures/engines");

/** The JuCode API's gateway groups route on loopback, answering only the login's token. */
async function fakeApi(token, groups) {
  const server = createServer((req, res) => {
    const ok = req.url === "/v1/gateway/groups" && req.headers.authorization === `Bearer ${token}`;
    res.writeHead(ok ? 200 : 404, { "content-type": "application/json" });
    res.end(ok ? JSON.stringify({ groups }) : "{}");
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

export const scenarios = [
  {
    name: "a Claude Code session is moved onto the gateway from its header",
    async run({ browser, home, cleanup }) {
      const fake = join(dirname(bin("jucode-daemon")), "fake-claude");
      assert(existsSync(fake), `build the fake Claude CLI first: cargo build -p jucode-fake-engines (${fake})`);
      mkdirSync(home.home, { recursive: true });
      // The account's URL is never reached here: switching only restarts the engine.
      writeFileSync(join(home.home, "auth.json"), JSON.stringify({ gateway: { url: "http://127.0.0.1:9", token: "e2e-token" } }));
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const created = await d.request("session_create", {
        cwd: home.project("app"),
        engine: "claude",
        options: {
          bin: fake,
          env: {
            FAKE_ENGINE_SCRIPT: join(FIXTURES, "claude-code-2.1.332-print-3turns.jsonl"),
            CLAUDE_CONFIG_DIR: join(home.root, ".claude"),
          },
        },
      });
      assert(created.type === "session_created", JSON.stringify(created));
      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink(`/remote/s/${created.session}`));
      const box = page.getByLabel("Gateway");
      await box.waitFor();
      assert(!(await box.isChecked()), "off the gateway at first");
      await box.click();
      await d.next((f) => f.type === "sessions" && f.sessions.some((s) => s.session === created.session && s.gateway === true), { seen: true }).catch((e) => {
        throw new Error(`${e.message}; page problems: ${page.problems.join(" | ")}; last frames: ${JSON.stringify(d.frames.slice(-3)).slice(0, 600)}`);
      });
      await eventually(async () => await box.isChecked(), "the switch follows the list");
      await shoot(page, "gateway-switch-desktop");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "a new Claude Code session starts on the gateway with a model of the catalog",
    async run({ browser, home, cleanup }) {
      const fake = join(dirname(bin("jucode-daemon")), "fake-claude");
      assert(existsSync(fake), `build the fake Claude CLI first: cargo build -p jucode-fake-engines (${fake})`);
      const api = await fakeApi("e2e-token", [{ id: "g1", name: "Standard", multiplier: 1.5, models: ["claude-opus-9", "claude-haiku-9"] }]);
      cleanup.push(() => api.close());
      mkdirSync(home.home, { recursive: true });
      writeFileSync(join(home.home, "auth.json"), JSON.stringify({ gateway: { url: api.url, token: "e2e-token" } }));
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const page = await newPage(browser, DESKTOP);
      const sent = [];
      page.on("websocket", (ws) => ws.on("framesent", (f) => typeof f.payload === "string" && sent.push(f.payload)));
      await page.goto(daemon.localLink("/remote/"));
      await page.getByRole("button", { name: "New session" }).click();
      await page.getByLabel("Directory").fill(home.project("app"));
      await page.getByLabel("Engine").selectOption("claude");
      const through = page.getByLabel("Run through the gateway");
      await through.waitFor();
      await through.check();
      await page.getByLabel("Model").selectOption("claude-haiku-9");
      await shoot(page, "gateway-new-session-desktop");
      await page.getByRole("button", { name: "Create" }).click();
      await eventually(async () => sent.some((p) => p.includes('"session_create"')), "the page sends session_create");
      const create = JSON.parse(sent.find((p) => p.includes('"session_create"')));
      assert(create.engine === "claude", JSON.stringify(create));
      assert(create.options?.jucode_gateway === true && create.options?.model === "claude-haiku-9", JSON.stringify(create));
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "without a login the new-session form offers no gateway",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const page = await newPage(browser, DESKTOP);
      const received = [];
      page.on("websocket", (ws) => ws.on("framereceived", (f) => typeof f.payload === "string" && received.push(f.payload)));
      await page.goto(daemon.localLink("/remote/"));
      await page.getByRole("button", { name: "New session" }).click();
      await page.getByLabel("Engine").selectOption("codex");
      // Judged once the page has the catalog's answer: empty, so no choice is offered.
      await eventually(async () => received.some((p) => p.includes('"type":"gateway_catalog"')), "the page asks for the catalog");
      const catalog = JSON.parse(received.find((p) => p.includes('"type":"gateway_catalog"')));
      assert(Array.isArray(catalog.groups) && catalog.groups.length === 0, JSON.stringify(catalog));
      assert((await page.getByLabel("Run through the gateway").count()) === 0, "no gateway choice without groups");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
];
