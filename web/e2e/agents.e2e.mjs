// Agents and their scheduled tasks against the real daemon: seeded agents (one with a hostile
// SVG icon, one with a memory file), an agent created in the page, its brief and settings
// edited, a task created, edited, run now and its usage read, and a delete refused mid-turn.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

function hostileSvg(base) {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 24 24" onload="window.__pwned='onload'">`,
    `<script>window.__pwned='script'</script>`,
    `<foreignObject width="24" height="24"><div xmlns="http://www.w3.org/1999/xhtml"><img src="${base}/pwn-foreign" onerror="window.__pwned='foreign'"/></div></foreignObject>`,
    `<image href="${base}/pwn-image" width="24" height="24"/>`,
    `<use xlink:href="${base}/pwn-use#x"/>`,
    `<a href="javascript:window.__pwned='a'"><circle cx="12" cy="12" r="10" fill="#e33" onclick="window.__pwned='click'"/></a>`,
    `<rect id="r" x="4" y="4" width="16" height="16" fill="url(${base}/pwn-fill)" stroke="url(#g)"/>`,
    `<circle cx="12" cy="12" r="6" fill="#fff"/>`,
    `</svg>`,
  ].join("");
}

function seedAgent(home, id, config, files = {}) {
  const dir = join(home.home, "agents", id);
  mkdirSync(join(dir, "memory"), { recursive: true });
  writeFileSync(join(dir, "agent.json"), JSON.stringify(config));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
}

async function nothingRan(page, requests) {
  const pwned = await page.evaluate(() => window.__pwned ?? null);
  assert(pwned === null, `hostile markup ran: ${pwned}`);
  const leaked = requests.filter((u) => u.includes("/pwn"));
  assert(leaked.length === 0, `the icon loaded: ${leaked.join(", ")}`);
  assert((await page.locator("main script, main foreignObject, main svg").count()) === 0, "SVG or script was put into the page itself");
}

export const scenarios = [
  {
    name: "a hostile SVG icon draws as an image and runs nothing; create an agent and a task, run it now",
    async run({ browser, home, cleanup }) {
      // The daemon's own origin is the one place a leak could reach: point the icon there.
      const ops = home.project("ops");
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      await daemon.stop();
      seedAgent(home, "evil", { name: "Evil <b>bold</b>", cwd: ops, icon: { kind: "svg", markup: hostileSvg(daemon.url) }, color: "#223344" }, { "role.md": "# Breaks things\n<script>window.__pwned='role'</script>" });
      seedAgent(home, "ops", { name: "Ops", cwd: ops, icon: { kind: "slug", value: "🛠" } }, { "role.md": "Keeps CI green" });
      const live = await startDaemon(home, { port: daemon.port });
      cleanup.push(() => live.stop());
      const d = await desk(live);
      cleanup.push(() => d.close());

      const page = await newPage(browser, PHONE);
      const requests = [];
      page.on("request", (r) => requests.push(r.url()));
      await page.goto(live.localLink("/remote/agents"));
      const list = page.getByTestId("agents");
      await list.getByText("Keeps CI green").waitFor();
      await list.getByText("Evil <b>bold</b>").waitFor();
      const src = await list.locator("li", { hasText: "Evil" }).locator("img.agent-icon").getAttribute("src");
      assert(src && src.startsWith("data:image/svg+xml"), `the icon is a data: image: ${src?.slice(0, 40)}`);
      const drawn = decodeURIComponent(src.slice(src.indexOf(",") + 1));
      for (const bad of ["<script", "onload", "onclick", "foreignObject", "javascript:", "/pwn", "<image"])
        assert(!drawn.toLowerCase().includes(bad.toLowerCase()), `the sanitised icon still holds ${bad}: ${drawn}`);
      assert(drawn.includes("<circle") && drawn.includes('stroke="url(#g)"'), `the harmless parts are kept: ${drawn}`);
      // The image has loaded (decoded by the browser) and nothing ran.
      await eventually(() => list.locator("li", { hasText: "Evil" }).locator("img.agent-icon").evaluate((i) => i.complete && i.naturalWidth > 0), "the icon drawn");
      await nothingRan(page, requests);
      await shoot(page, "agents-phone");

      // Create an agent in the page.
      await page.getByRole("button", { name: "New agent" }).click();
      const form = page.getByRole("form", { name: "New agent" });
      await form.getByLabel("Name").fill("Night owl");
      await form.getByLabel("Role").fill("Watches the nightly build");
      await form.getByLabel("Working directory").fill(ops);
      const created = d.next((f) => f.type === "agents" && f.agents.some((a) => a.id === "night-owl"));
      await form.getByRole("button", { name: "Create agent" }).click();
      const agents = await created;
      assert(agents.agents.find((a) => a.id === "night-owl").summary === "Watches the nightly build", "the role became the summary");
      await eventually(() => page.url().endsWith("/remote/agents/night-owl"), "the agent's page");
      await page.getByRole("heading", { name: "Night owl" }).waitFor();

      // A weekly task, then edited to a cron expression.
      await page.getByRole("button", { name: "New task" }).click();
      const tf = page.getByRole("form", { name: "New task" });
      await tf.getByLabel("Task name").fill("Morning check");
      await tf.getByLabel("Prompt").fill("Look at the nightly build");
      await tf.getByLabel("Repeat").selectOption("weekly");
      await tf.getByLabel("Time").fill("07:30");
      await tf.getByLabel("Wed").check();
      const saved = d.next((f) => f.type === "schedules" && f.schedules.some((s) => s.agent === "night-owl"));
      await tf.getByRole("button", { name: "Save task" }).click();
      const task = (await saved).schedules.find((s) => s.agent === "night-owl");
      assert(task.repeat === "weekly" && task.time === "07:30" && JSON.stringify(task.days) === "[1,3]", `the task as saved: ${JSON.stringify(task)}`);
      const item = page.locator(`[data-testid="schedule"][data-id="${task.id}"]`);
      await item.getByText("Mon, Wed at 07:30").waitFor();
      await item.getByText(/Next: (?!—)/).waitFor();
      await page.evaluate(() => { document.getElementById("sched-h")?.scrollIntoView(); scrollBy(0, -70); });
      await shoot(page, "agent-schedule-phone");

      await item.getByRole("button", { name: "Edit" }).click();
      const ef = page.getByRole("form", { name: "Edit task Morning check" });
      await ef.getByLabel("Repeat").selectOption("cron");
      await ef.getByLabel(/Cron expression/).fill("15 6 * * 1-5");
      const edited = d.next((f) => f.type === "schedules" && f.schedules.some((s) => s.id === task.id && s.repeat === "cron"));
      await ef.getByRole("button", { name: "Save task" }).click();
      const cron = (await edited).schedules.find((s) => s.id === task.id);
      assert(cron.cron === "15 6 * * 1-5" && cron.time === "" && cron.days.length === 0, `the edited task: ${JSON.stringify(cron)}`);
      await item.getByText("cron 15 6 * * 1-5").waitFor();

      // Run it now: the daemon starts a session of the agent and records the run.
      const ran = d.next((f) => f.type === "schedules" && f.schedules.some((s) => s.id === task.id && s.last_run_at));
      await item.getByRole("button", { name: "Run now" }).click();
      await ran;
      await item.getByText("Started.").waitFor();
      await item.getByText(/Last: (?!never)/).waitFor();
      await d.next((f) => f.type === "agents" && f.agents.some((a) => a.id === "night-owl" && a.sessions > 0), { seen: true });
      // Its usage (the fake engine reports a turn once the run is delivered).
      await eventually(async () => {
        await item.getByRole("button", { name: "Usage" }).click();
        return /Usage: [1-9]\d* turns in 1 sessions/.test((await item.locator(".sched-usage").textContent()) ?? "");
      }, "the task's usage counting its run");
      // Delete the task.
      await item.getByRole("button", { name: "Delete…" }).click();
      const gone = d.next((f) => f.type === "schedules" && !f.schedules.some((s) => s.id === task.id));
      await item.getByRole("button", { name: "Yes, delete" }).click();
      await gone;
      await page.getByText("No scheduled tasks.").waitFor();
      await page.emulateMedia({ colorScheme: "dark" });
      await page.evaluate(() => scrollTo(0, 0));
      await shoot(page, "agent-page-phone-dark");
      await nothingRan(page, requests);
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "an agent's page: brief, settings, memory, sessions, and a delete refused mid-turn",
    async run({ browser, home, cleanup }) {
      const ops = home.project("ops");
      seedAgent(home, "ops", { name: "Ops", cwd: ops, color: "#12abef" }, {
        "role.md": "# Keeps CI green\nAnd **nothing** else.",
        "policy.md": "Ask before pushing.",
        "memory/deploy.md": "# How to deploy\n<script>window.__pwned='memory'</script>\n[run](javascript:window.__pwned='mlink')\n\n1. `make deploy`",
      });
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink("/remote/agents/ops"));
      await page.getByRole("heading", { name: "Ops" }).waitFor();
      await page.getByRole("heading", { name: "Keeps CI green" }).waitFor();

      // The memory file, drawn as markdown, hostile parts inert.
      await page.getByRole("button", { name: "deploy.md" }).click();
      const mem = page.getByRole("article", { name: "memory/deploy.md" });
      await mem.getByRole("heading", { name: "How to deploy" }).waitFor();
      await mem.getByText("make deploy").waitFor();
      assert((await mem.locator("script").count()) === 0 && (await mem.locator('a[href^="javascript"]').count()) === 0, "memory markdown is inert");

      // Edit the role.
      await page.getByRole("button", { name: "Edit role" }).click();
      await page.getByLabel("Role (role.md)").fill("Keeps CI green and the deploys small");
      const roled = d.next((f) => f.type === "agents" && f.agents.some((a) => a.id === "ops" && a.summary === "Keeps CI green and the deploys small"));
      await page.getByRole("button", { name: "Save role" }).click();
      await roled;
      const got = await d.request("agent_get", { agent: "ops" });
      assert(got.brief["role.md"] === "Keeps CI green and the deploys small", "role.md rewritten");
      assert(got.brief["policy.md"] === "Ask before pushing.", "the other brief files untouched");

      // Settings: approval mode, sandbox, network, an emoji icon.
      await page.getByLabel("Approval mode").selectOption("manual");
      await page.getByLabel("Sandbox", { exact: true }).selectOption("read-only");
      await page.getByLabel("Network for sandboxed commands").uncheck();
      await page.getByLabel("Icon", { exact: true }).selectOption("slug");
      await page.getByLabel(/Emoji or text/).fill("🦉");
      const set = d.next((f) => f.type === "agents" && f.agents.some((a) => a.id === "ops" && a.approval_mode === "manual"));
      await page.getByRole("button", { name: "Save settings" }).click();
      const a = (await set).agents.find((x) => x.id === "ops");
      assert(a.sandbox === "read-only" && a.network === false && a.icon?.kind === "slug" && a.icon.value === "🦉" && a.color === "#12abef", `settings saved: ${JSON.stringify(a)}`);
      await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
      // A bad icon is refused with the daemon's words.
      await page.getByLabel(/Emoji or text/).fill("x".repeat(40));
      await page.getByRole("button", { name: "Save settings" }).click();
      await page.getByRole("alert").filter({ hasText: "a slug is at most 32 UTF-16 units" }).waitFor({ timeout: 5000 }).catch(async (e) => { throw new Error(`${e.message}; alerts: ${await page.getByRole("alert").allTextContents()}`); });

      // Start a session as this agent; it is listed on the agent's page.
      await page.getByRole("button", { name: "Start a session" }).click();
      await eventually(() => /\/remote\/s\/[^/]+$/.test(page.url()), "the new session's page");
      const session = decodeURIComponent(page.url().split("/").pop());
      const sessions = await d.request("session_list");
      assert(sessions.sessions.find((s) => s.session === session)?.agent === "ops", "the session belongs to ops");

      // A turn running: delete is refused, with the daemon's error.
      const busy = d.next((f) => f.type === "agents" && f.agents.some((x) => x.id === "ops" && x.busy));
      d.send("user_message", { session, content: "sleep 6000" });
      await busy;
      await page.goto(daemon.localLink("/remote/agents/ops"));
      await page.getByRole("link", { name: new RegExp(session.slice(0, 8)) }).or(page.locator(`a[href="/remote/s/${session}"]`)).first().waitFor();
      await page.getByText("running").first().waitFor();
      await page.getByRole("button", { name: "deploy.md" }).click();
      await page.getByRole("article", { name: "memory/deploy.md" }).waitFor();
      await page.evaluate(() => scrollTo(0, 0));
      await shoot(page, "agent-page-desktop");
      await page.getByRole("button", { name: "Delete agent…" }).click();
      await page.getByRole("button", { name: "Yes, delete Ops" }).click();
      await page.getByRole("alert").getByText("agent ops has a session in a turn; wait for it to finish or interrupt it first").waitFor();
      assert((await d.request("agent_list")).agents.some((x) => x.id === "ops"), "ops is still there");
      const pwned = await page.evaluate(() => window.__pwned ?? null);
      assert(pwned === null, `hostile markup ran: ${pwned}`);
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
];
