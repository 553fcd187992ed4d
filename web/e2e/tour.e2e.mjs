// Every main view at phone and desktop size, in the light and the dark theme, on a daemon with
// something in each list: each view passes the audit (named controls, alt texts, unique ids,
// no sideways scrolling) and leaves a screenshot in target/screenshots/.
import { writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, auditView, desk, newPage, shoot, startDaemon } from "./harness.mjs";

const LATER = 4_000_000_000_000;

/** An agent `ops` with an archived session, an open question and an unread report. */
function seed(home) {
  const cwd = home.project("ops");
  const dir = join(home.home, "agents", "ops");
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "agent.json"), JSON.stringify({ name: "Ops", cwd }));
  writeFileSync(join(dir, "role.md"), "Keeps the build green and answers tickets.\n");
  const state = join(home.home, "daemon");
  mkdirSync(state, { recursive: true });
  const lines = (records) => records.map((r) => JSON.stringify(r)).join("\n") + "\n";
  writeFileSync(
    join(state, "sessions.jsonl"),
    lines([
      { kind: "open", session: "s1", cwd, engine: "jucode", agent: "ops", at: 1 },
      { kind: "close", session: "s1", at: 2 },
    ]),
  );
  writeFileSync(
    join(state, "questions.jsonl"),
    lines([{ kind: "asked", id: "q-1", agent: "ops", session: "s1", title: "Ship the fix tonight?", body: "The **nightly** build is red.", assumption: "yes", default: "ship it", importance: "normal", due_at: LATER, at: 10 }]),
  );
  writeFileSync(
    join(state, "reports.jsonl"),
    lines([{ kind: "posted", id: "r-1", agent: "ops", session: "s1", title: "Nightly sweep", body: "Closed 3 tickets.", at: 20 }]),
  );
}

const VIEWS = [
  ["sessions", "/remote"],
  ["inbox", "/remote/inbox"],
  ["agents", "/remote/agents"],
  ["agent", "/remote/agents/ops"],
  ["settings", "/remote/settings"],
];

export const scenarios = [
  {
    name: "every view passes the audit at phone and desktop size in both themes",
    async run({ browser, home, cleanup }) {
      seed(home);
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      await d.request("session_create", { cwd: home.project("demo") });
      const problems = [];
      for (const [size, device] of [["phone", PHONE], ["desktop", DESKTOP]]) {
        for (const theme of ["light", "dark"]) {
          const page = await newPage(browser, { ...device, colorScheme: theme });
          await page.goto(daemon.localLink());
          await page.locator("header.top nav").waitFor();
          for (const [view, path] of VIEWS) {
            await page.goto(`${daemon.url}${path}`);
            await page.locator("main#main h1").first().waitFor();
            for (const p of await auditView(page)) problems.push(`${view} ${size} ${theme}: ${p}`);
            await shoot(page, `tour-${view}-${size}-${theme}`);
          }
          problems.push(...page.problems);
          await page.context().close();
        }
      }
      assert(problems.length === 0, problems.join("\n"));
    },
  },
];
