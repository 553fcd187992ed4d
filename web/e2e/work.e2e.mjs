// The work view: a requirement noted in the page and taken through the start gate (understand,
// plan, go) on the scripted engine, each step confirmed in the page while a desk client checks
// what the daemon holds; an agent's proposals decided; a notification's link opening its
// requirement on a phone; hostile words and progress drawn as text.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, auditView, desk, eventually, newPage, shoot, startDaemon, startFakeModel } from "./harness.mjs";

const HOSTILE = '<img src="x" onerror="window.__pwned = \'img\'"> <script>window.__pwned = "script"</script>';

/** Project p1 at <root>/app; returns its directory. */
function seedProject(home) {
  const cwd = home.project("app");
  const state = join(home.home, "daemon");
  mkdirSync(state, { recursive: true });
  writeFileSync(
    join(state, "workspaces.json"),
    JSON.stringify({ rev: 1, workspaces: [{ id: "w1", name: "W", projects: [{ id: "p1", name: "app", path: cwd }] }] }),
  );
  return cwd;
}

/** Two requirements carrying an agent's proposals, with hostile words in them. */
function seedProposals(home) {
  const now = Date.now();
  const base = { images: [], project: "p1", sessions: [], progress_at: 0, source_session: null, gate: null, created_at: now, updated_at: now };
  const lines = [
    {
      kind: "saved",
      requirement: {
        ...base,
        id: "R-1",
        text: `Cache the index ${HOSTILE}`,
        title: "",
        state: "open",
        source: "desktop",
        progress: { goal: "a fast search", decided: [HOSTILE], done: ["measured"], doing: [], blocked: [], next: ["ship"], files: ["src/index.rs"], note: HOSTILE },
        proposal: { kind: "close", outcome: "done", agent: "ops", session: "s9", reason: `All done ${HOSTILE}`, at: now },
      },
    },
    {
      kind: "saved",
      requirement: {
        ...base,
        id: "R-2",
        text: "Rotate the logs weekly",
        title: "",
        state: "proposed",
        source: "agent",
        progress: {},
        proposal: { kind: "create", agent: "ops", session: "s9", reason: "the disk filled up twice", at: now },
      },
    },
  ];
  writeFileSync(join(home.home, "daemon", "requirements.jsonl"), lines.map((l) => JSON.stringify(l) + "\n").join(""));
}

async function nothingRan(page) {
  const pwned = await page.evaluate(() => window.__pwned ?? null);
  assert(pwned === null, `hostile markup ran: ${pwned}`);
  assert((await page.locator("main script, main img[onerror]").count()) === 0, "hostile markup was drawn");
}

const find = (f, id) => f.requirements.find((r) => r.id === id);

export const scenarios = [
  {
    name: "note a requirement and take it through the start gate: understand, plan, work",
    async run({ browser, home, cleanup }) {
      seedProject(home);
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink("/remote/work"));
      await page.getByText("No open requirements.").waitFor();

      // Note it in the page, in project p1.
      await page.getByRole("button", { name: "New requirement" }).click();
      await page.getByLabel("What do you want done?").fill(`Make search fast ${HOSTILE}`);
      await page.getByLabel("Project", { exact: true }).selectOption("p1");
      const created = d.next((f) => f.type === "requirements" && f.requirements.some((r) => r.text.startsWith("Make search fast")));
      await page.getByRole("button", { name: "Save" }).click();
      const made = find(await created, "R-1");
      assert(made.project === "p1" && made.source === "desktop" && made.state === "idea", `created: ${JSON.stringify(made)}`);
      await page.getByRole("heading", { name: /Make search fast/ }).waitFor();
      await nothingRan(page);

      // Start a session behind the gate, asking for a plan; the page opens the session.
      await page.getByLabel("Ask for a plan first").check();
      await page.getByLabel("Then work in").selectOption("edits");
      const begun = d.next((f) => f.type === "requirements" && find(f, "R-1")?.gate);
      await page.getByRole("button", { name: "Start" }).click();
      const gate = find(await begun, "R-1").gate;
      assert(gate.stage === "understand" && gate.plan === true && gate.mode === "edits", `gate: ${JSON.stringify(gate)}`);
      await page.waitForURL(new RegExp(`/remote/s/${gate.session}`));
      // The desk watches the session too, to see its mode change.
      const snap = d.next((f) => f.type === "watching" && f.session === gate.session);
      d.send("watch", { session: gate.session });
      await snap;

      // Back to it: once the session has explained itself, confirm asks for the plan.
      await page.goto(daemon.localLink("/remote/work/R-1"));
      const toPlan = page.getByRole("button", { name: "Confirm and ask for a plan" });
      await toPlan.waitFor();
      await page.locator(".wgate .wreply").waitFor();
      await page.getByLabel("Anything to add (optional)").first().fill("mind the cache");
      const planning = d.next((f) => f.type === "requirements" && find(f, "R-1")?.gate?.stage === "plan");
      await toPlan.click();
      await planning;
      const planned = page.getByRole("button", { name: "Approve the plan and start" });
      await planned.waitFor();
      await shoot(page, "work-gate-desktop");

      // The last step: the gate goes, the session works in the mode asked for.
      const going = d.next((f) => f.type === "requirements" && !find(f, "R-1")?.gate);
      const mode = d.next((f) => f.type === "approval_mode" && f.session === gate.session && f.mode !== "manual");
      await planned.click();
      await going;
      const m = await mode;
      assert(m.mode === "auto-edit", `the mode after the gate: ${JSON.stringify(m)}`);
      await eventually(async () => (await page.locator(".wgate").count()) === 0, "the gate card leaving");

      // Park it from the page; it leaves the open list.
      await page.getByRole("button", { name: "Edit" }).click();
      await page.getByLabel("State").selectOption("parked");
      const parked = d.next((f) => f.type === "requirements" && find(f, "R-1")?.state === "parked");
      await page.getByRole("button", { name: "Save" }).click();
      await parked;
      await page.getByRole("link", { name: "← Work" }).click();
      await page.getByText("No open requirements.").waitFor();
      await page.getByRole("button", { name: /Show done and parked/ }).click();
      await page.getByRole("link", { name: /Make search fast/ }).waitFor();
      await nothingRan(page);
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "on a phone: a notification's link opens its requirement, proposals are decided",
    async run({ browser, home, cleanup }) {
      seedProject(home);
      seedProposals(home);
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const page = await newPage(browser, PHONE);
      // The link a requirement's notification carries.
      await page.goto(daemon.localLink("/remote?requirement=R-1"));
      await page.getByText("Agent ops proposes to close it as done.").waitFor();
      await page.getByText("a fast search").waitFor();
      await page.getByText("src/index.rs").waitFor();
      await nothingRan(page);
      const problems = await auditView(page);
      assert(problems.length === 0, `the requirement on a phone: ${problems.join("; ")}`);
      await shoot(page, "work-requirement-phone");

      // Both wait for the user: the tab counts them.
      await eventually(async () => (await page.locator("nav .count").textContent().catch(() => "")) === "2", "the Work tab counting 2");

      // Accept the close proposal: it is done.
      const closed = d.next((f) => f.type === "requirements" && find(f, "R-1")?.state === "done");
      await page.getByRole("button", { name: "Close it" }).click();
      const r1 = find(await closed, "R-1");
      assert(r1.proposal == null, `the proposal stays: ${JSON.stringify(r1.proposal)}`);

      // Turn down the proposal to note R-2: it is deleted.
      await page.getByRole("link", { name: "← Work" }).click();
      await page.getByRole("link", { name: /Rotate the logs weekly/ }).click();
      await page.getByText("the disk filled up twice").waitFor();
      const gone = d.next((f) => f.type === "requirements" && !find(f, "R-2"));
      await page.getByRole("button", { name: "Turn down" }).click();
      await gone;
      await page.waitForURL(/\/remote\/work$/);
      await page.getByText("No open requirements.").waitFor();
      assert((await page.locator("nav .count").count()) === 0, "nothing waits any more");
      const listProblems = await auditView(page);
      assert(listProblems.length === 0, `the work view on a phone: ${listProblems.join("; ")}`);
      await shoot(page, "work-phone");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "dispatch from a phone: the plan shown and approved, its task run and summed up",
    async run({ browser, home, cleanup }) {
      seedProject(home);
      // The daemon's own engine against the scripted model server: a message `CALL dispatch
      // {…}` makes the dispatcher plan, and a task's session answers `user said: <text>`.
      const model = await startFakeModel();
      cleanup.push(() => model.stop());
      writeFileSync(join(home.home, "config.json"), JSON.stringify(model.config));
      const daemon = await startDaemon(home, { builtin: true });
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const page = await newPage(browser, PHONE);
      await page.goto(daemon.localLink("/remote/work"));
      await page.getByText("Nothing dispatched yet.").waitFor();

      const tasks = [{ title: `greet ${HOSTILE}`, project: "p1", text: "hello from the page" }];
      const text = `CALL dispatch ${JSON.stringify({ action: "plan", tasks })}`;
      await page.getByLabel("Requests to split across your projects").fill(text);
      await page.getByLabel("Tasks run in").selectOption("auto-edit");
      const awaiting = d.next((f) => f.type === "dispatches" && f.dispatches.some((x) => x.status === "awaiting"));
      await page.getByRole("button", { name: "Dispatch", exact: true }).click();
      const planned = (await awaiting).dispatches.find((x) => x.status === "awaiting");
      assert(planned.plan === true && planned.mode === "auto-edit" && planned.tasks.length === 1, JSON.stringify(planned));
      const card = page.getByRole("listitem", { name: `Dispatch ${planned.id.slice(0, 8)}` });
      await card.getByText("Plan waiting for you").waitFor();
      await card.getByText("Planned").waitFor();
      await eventually(async () => (await page.locator("nav .count").textContent().catch(() => "")) === "1", "the Work tab counting the plan");
      await nothingRan(page);
      const problems = await auditView(page);
      assert(problems.length === 0, `the plan on a phone: ${problems.join("; ")}`);
      await shoot(page, "work-dispatch-plan-phone");

      // Approve it with a note: the task runs in its own session and the dispatch is summed up.
      await card.getByLabel("Note for the dispatcher (optional)").fill("go ahead");
      const done = d.next((f) => f.type === "dispatches" && f.dispatches.some((x) => x.id === planned.id && x.status === "done"));
      await card.getByRole("button", { name: "Run the plan" }).click();
      const finished = (await done).dispatches.find((x) => x.id === planned.id);
      const task = finished.tasks[0];
      assert(task.status === "done" && task.reply === "user said: hello from the page", JSON.stringify(task));
      await card.getByText("Done", { exact: true }).first().waitFor();
      await card.getByText("user said: hello from the page").first().waitFor();
      await card.getByRole("link", { name: `session ${task.session.slice(0, 8)}` }).waitFor();
      assert((await page.locator("nav .count").count()) === 0, "nothing waits once it is done");
      await nothingRan(page);
      await shoot(page, "work-dispatch-done-phone");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
];
