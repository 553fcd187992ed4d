// The gateway switch of a Claude Code session (the fake Claude CLI of jucode-fake-engines,
// built in the same target directory): signed in to a JuCode account, the page moves the
// session onto the gateway and the list's flag follows.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DESKTOP, assert, bin, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "../../fixtures/engines");

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
];
