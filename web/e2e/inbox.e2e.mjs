// The inbox: questions and reports seeded into the state files before the daemon starts, a
// deferred action made by an unattended session, and each answered, decided or read in the
// page while a desk client checks the daemon heard it. Hostile bodies run nothing.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

const LATER = 4_000_000_000_000;
const HOSTILE = [
  "Check **this** first.",
  "<script>window.__pwned = 'script'</script>",
  '<img src="x" onerror="window.__pwned = \'img\'">',
  "[a javascript link](javascript:window.__pwned='link') and [a fine one](https://example.com)",
].join("\n\n");

function seedLines(path, lines) {
  writeFileSync(path, lines.map((l) => JSON.stringify(l) + "\n").join(""));
}

/** Agent `ops`, its closed session s1, two open questions in it and two reports. */
function seed(home) {
  const cwd = home.project("ops");
  const agentDir = join(home.home, "agents", "ops");
  mkdirSync(join(agentDir, "memory"), { recursive: true });
  writeFileSync(join(agentDir, "agent.json"), JSON.stringify({ name: "Ops", cwd }));
  const state = join(home.home, "daemon");
  mkdirSync(state, { recursive: true });
  const now = Date.now();
  seedLines(join(state, "sessions.jsonl"), [
    { kind: "open", session: "s1", cwd, engine: "jucode", agent: "ops", at: 1 },
    { kind: "close", session: "s1", at: 2 },
  ]);
  const asked = (id, title, body, at) => ({ kind: "asked", id, agent: "ops", session: "s1", title, body, assumption: "we wait", default: "wait for Monday", importance: "high", due_at: LATER, at });
  seedLines(join(state, "questions.jsonl"), [
    asked("q-1", "Deploy tonight?", HOSTILE, now - 60_000),
    asked("q-2", "Which region?", "eu or us", now - 50_000),
  ]);
  seedLines(join(state, "reports.jsonl"), [
    { kind: "posted", id: "r-1", agent: "ops", session: "s1", title: "Night run", body: `All 214 tests pass.\n\n${HOSTILE}`, at: now - 30_000 },
    { kind: "posted", id: "r-2", agent: "ops", session: "s1", title: "Old news", body: "read before", at: now - 90_000 },
    { kind: "read", id: "r-2", at: now - 80_000 },
  ]);
}

/** A session created on the desk that nobody watches: `approve` defers the call. */
async function deferredAction(d, home) {
  const created = await d.request("session_create", { cwd: home.project("app") });
  const listed = d.next((f) => f.type === "actions" && f.actions.some((a) => a.session_id === created.session));
  d.send("user_message", { session: created.session, content: "approve echo hi" });
  const f = await listed;
  return f.actions.find((a) => a.session_id === created.session);
}

async function nothingRan(page) {
  const pwned = await page.evaluate(() => window.__pwned ?? null);
  assert(pwned === null, `hostile markup ran: ${pwned}`);
  assert((await page.locator("main script").count()) === 0, "a script element was drawn");
  assert((await page.locator('main a[href^="javascript"]').count()) === 0, "a javascript: link was drawn");
  assert((await page.locator("main img[onerror], main [onerror]").count()) === 0, "an event handler was drawn");
}

async function navCount(page) {
  const t = await page.locator("nav .count").textContent().catch(() => null);
  return t === null ? 0 : Number(t);
}

export const scenarios = [
  {
    name: "answer a question, decide an action and read a report from the inbox",
    async run({ browser, home, cleanup }) {
      seed(home);
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const action = await deferredAction(d, home);
      assert(action.summary === "echo hi", `the deferred action: ${JSON.stringify(action)}`);

      const page = await newPage(browser, PHONE);
      await page.goto(daemon.localLink("/remote/inbox"));
      const open = page.getByTestId("inbox-open");
      await open.getByText("Deploy tonight?").waitFor();
      await open.getByText("Night run").waitFor();
      await open.getByText("echo hi").waitFor();
      // Two open questions, one pending action, one unread report (r-2 was read).
      await eventually(async () => (await navCount(page)) === 4, "the nav counting 4 waiting");
      // Newest first: the action (just now), the report, then the questions.
      const kinds = await open.locator(":scope > li").evaluateAll((ls) => ls.map((l) => l.dataset.testid + ":" + l.dataset.id));
      assert(kinds[0] === `inbox-action:${action.id}` && kinds[1] === "inbox-report:r-1" && kinds[2] === "inbox-question:q-2", `order: ${kinds}`);
      await nothingRan(page);
      await shoot(page, "inbox-phone");

      // Answer q-1 in the page; the desk sees it answered.
      const q1 = open.locator('[data-id="q-1"]');
      await q1.getByLabel("Your answer").fill("yes, after 22:00");
      const answered = d.next((f) => f.type === "questions" && f.closed.some((q) => q.id === "q-1" && q.answer === "yes, after 22:00"));
      await q1.getByRole("button", { name: "Answer" }).click();
      await answered;
      await eventually(async () => (await open.locator('[data-id="q-1"]').count()) === 0, "q-1 leaving the open list");

      // Allow the deferred action; the desk sees it decided and the engine runs it.
      const decided = d.next((f) => f.type === "actions" && f.closed.some((a) => a.id === action.id && a.closed_reason === "allow"));
      const ran = d.next((f) => f.type === "action_decided" && f.session === action.session_id);
      await open.locator(`[data-id="${action.id}"]`).getByRole("button", { name: "Allow" }).click();
      await decided;
      const out = await ran;
      assert(out.decision === "allow", `action_decided: ${JSON.stringify(out)}`);

      // Open the unread report: the daemon hears report_read (a second desk gets the broadcast).
      const d2 = await desk(daemon);
      cleanup.push(() => d2.close());
      const readFrame = d2.next((f) => f.type === "report_read" && f.report === "r-1");
      const r1 = open.locator('[data-id="r-1"]');
      await r1.getByRole("button", { name: /Night run/ }).click();
      await r1.getByText("All 214 tests pass.").waitFor();
      await readFrame;
      const list = await d.request("report_list");
      assert(list.reports.find((r) => r.id === "r-1").read === true, "r-1 saved as read");
      await eventually(async () => (await r1.getByText("unread").count()) === 0, "the unread mark going");
      await nothingRan(page);
      // Only q-2 waits now.
      await eventually(async () => (await navCount(page)) === 1, "the nav counting 1 waiting");

      // Close q-2 without answering, then reopen it from the done section.
      const closed = d.next((f) => f.type === "questions" && f.closed.some((q) => q.id === "q-2"));
      await open.locator('[data-id="q-2"]').getByRole("button", { name: "Close" }).click();
      await closed;
      await page.getByRole("button", { name: /Done/ }).click();
      const done = page.getByTestId("inbox-done");
      await done.locator('[data-id="q-1"]').getByText("yes, after 22:00").waitFor();
      assert((await done.locator('[data-id="q-1"]').getByRole("button", { name: "Reopen" }).count()) === 0, "an answered question offers no reopen");
      const reopened = d.next((f) => f.type === "questions" && f.questions.some((q) => q.id === "q-2"));
      await done.locator('[data-id="q-2"]').getByRole("button", { name: "Reopen" }).click();
      await reopened;
      await open.locator('[data-id="q-2"]').waitFor();
      await page.emulateMedia({ colorScheme: "dark" });
      await page.evaluate(() => scrollTo(0, 0));
      await shoot(page, "inbox-phone-dark");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "the inbox on a desktop: an action closed, reopened from done, then denied",
    async run({ browser, home, cleanup }) {
      seed(home);
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const action = await deferredAction(d, home);
      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink("/remote/inbox"));
      const open = page.getByTestId("inbox-open");
      const item = open.locator(`[data-id="${action.id}"]`);
      await item.waitFor();
      const closed = d.next((f) => f.type === "actions" && f.closed.some((a) => a.id === action.id));
      await item.getByRole("button", { name: "Close" }).click();
      await closed;
      await page.getByRole("button", { name: /Done/ }).click();
      const reopened = d.next((f) => f.type === "actions" && f.actions.some((a) => a.id === action.id));
      await page.getByTestId("inbox-done").locator(`[data-id="${action.id}"]`).getByRole("button", { name: "Reopen" }).click();
      await reopened;
      await open.locator(`[data-id="${action.id}"]`).waitFor();
      // Deny it now: the desk sees the decision.
      const denied = d.next((f) => f.type === "actions" && f.closed.some((a) => a.id === action.id && a.closed_reason === "deny"));
      await open.locator(`[data-id="${action.id}"]`).getByRole("button", { name: "Deny" }).click();
      await denied;
      await page.getByTestId("inbox-done").locator(`[data-id="${action.id}"]`).getByText("Denied").waitFor();
      await shoot(page, "inbox-desktop");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
];
