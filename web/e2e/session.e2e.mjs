// The session list and a session's live view, against the real daemon and the scripted
// engine. Sequences of real serve events are played with `replay <file>` (JSONL written into
// the session's directory).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

const jsonl = (lines) => lines.map((l) => JSON.stringify(l)).join("\n") + "\n";

/** A daemon, a desk client, a project and a session in it, and a page showing that session. */
async function setup({ browser, home, cleanup }, device = DESKTOP, { open = true } = {}) {
  const daemon = await startDaemon(home);
  cleanup.push(() => daemon.stop());
  const d = await desk(daemon);
  cleanup.push(() => d.close());
  const dir = home.project("proj");
  const { session } = await d.request("session_create", { cwd: dir });
  const page = await newPage(browser, device);
  const sent = [];
  page.on("websocket", (ws) => ws.on("framesent", (f) => { try { sent.push(JSON.parse(String(f.payload))); } catch {} }));
  if (open) {
    await page.goto(daemon.localLink(`/remote/s/${session}`));
    await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
  }
  return { daemon, d, dir, session, page, sent };
}

async function say(page, text) {
  await page.getByLabel("Message").fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

const noProblems = (page) => assert(page.problems.length === 0, page.problems.join("\n"));

export const scenarios = [
  {
    name: "streamed text shows before the turn ends, as markdown, and ready ends the turn",
    async run(ctx) {
      const { dir, page, sent } = await setup(ctx, DESKTOP);
      writeFileSync(join(dir, "stream.jsonl"), jsonl([
        { type: "user_message", content: "what is in this picture?", images: [join(dir, "shot.png")] },
        { type: "assistant_start" },
        { type: "assistant_delta", delta: "Hello " },
        { type: "_sleep", ms: 700 },
        { type: "assistant_delta", delta: "**brave** " },
        { type: "_sleep", ms: 700 },
        { type: "assistant_delta", delta: "new world.\n\n- one\n- two" },
        { type: "_save", item: { role: "assistant", content: "Hello **brave** new world.\n\n- one\n- two" } },
      ]));
      await say(page, "replay stream.jsonl");
      await page.locator(".assistant", { hasText: "Hello" }).waitFor();
      const partial = await page.locator(".assistant").last().innerText();
      assert(!partial.includes("new world"), `the first delta shows alone: ${partial}`);
      await page.locator('[data-testid="session-state"]', { hasText: "working" }).waitFor();
      await page.locator(".assistant strong", { hasText: "brave" }).waitFor();
      await page.locator(".assistant li", { hasText: "two" }).waitFor();
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      assert((await page.locator(".assistant .caret").count()) === 0, "no caret after ready");
      // A message's image is asked of the daemon (fs_image); this daemon does not serve it yet,
      // so the page names the file instead.
      await page.locator(".thumb-missing", { hasText: "shot.png" }).waitFor();
      assert(sent.some((f) => f.op === "fs_image" && f.path === join(dir, "shot.png")), "fs_image asked");
      noProblems(page);
    },
  },
  {
    name: "a long answer streamed in 2,000 deltas keeps the page responsive",
    async run(ctx) {
      const { dir, page } = await setup(ctx, DESKTOP);
      const lines = [{ type: "assistant_start" }];
      for (let i = 0; i < 2000; i++) {
        const para = i % 10 === 9 ? "\n\n" : " ";
        lines.push({ type: "assistant_delta", delta: `word${i} **bold** \`code\` [link](https://example.com/${i})${para}` });
        if (i % 100 === 99) lines.push({ type: "_sleep", ms: 60 });
      }
      writeFileSync(join(dir, "long.jsonl"), jsonl(lines));
      await page.evaluate(() => {
        window.__long = [];
        new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); }).observe({ type: "longtask", buffered: false });
      });
      const t0 = Date.now();
      await say(page, "replay long.jsonl");
      const gap = () => page.evaluate(() => { const el = document.querySelector(".vscroll"); return el.scrollHeight - el.scrollTop - el.clientHeight; });
      await page.locator(".assistant", { hasText: "word400" }).waitFor();
      assert((await gap()) < 5, "while the reader is at the bottom, the view follows the stream");
      // The reader scrolls up: the stream no longer moves the view.
      await page.evaluate(() => { document.querySelector(".vscroll").scrollTop = 0; });
      await page.getByRole("button", { name: /Jump to latest/ }).waitFor();
      await page.locator(".assistant", { hasText: "word900" }).waitFor();
      const top = await page.evaluate(() => document.querySelector(".vscroll").scrollTop);
      assert(top < 5, `the view stays where the reader put it: ${top}`);
      await page.locator(".assistant", { hasText: "word1999" }).waitFor();
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      const ms = Date.now() - t0;
      const long = await page.evaluate(() => window.__long);
      const worst = Math.max(0, ...long);
      await page.getByRole("button", { name: /Jump to latest/ }).click();
      await eventually(async () => (await gap()) < 5, "back at the bottom");
      const blocks = await page.locator(".assistant .md").count();
      console.log(`  2,000 deltas (${blocks} blocks): ${ms} ms to the end, ${long.length} long tasks, worst ${worst.toFixed(0)} ms`);
      assert(blocks >= 150, `the answer is drawn as blocks: ${blocks}`);
      assert(worst < 300, `a long task of ${worst} ms`);
      noProblems(page);
    },
  },
  {
    name: "reasoning, a tool call with clipped output and an edit approval with hunks the page picks",
    async run(ctx) {
      const { dir, page, sent, session } = await setup(ctx, PHONE);
      const long = Array.from({ length: 40 }, (_, i) => `line ${i + 1}`).join("\n");
      writeFileSync(join(dir, "edit.jsonl"), jsonl([
        { type: "thinking_start" },
        { type: "reasoning_delta", delta: "The test fails because of the off-by-one." },
        { type: "assistant_start" },
        { type: "assistant_delta", delta: "I will look at the file first." },
        { type: "tool_start", call_id: "t1", name: "bash" },
        { type: "tool_output", call_id: "t1", name: "bash", output: long, is_error: false },
        { type: "_approval", call_id: "c1", name: "edit", summary: "edit src/a.rs", subagent_id: null, hunks: [
          { id: "h1", file: "src/a.rs", header: "@@ -1,3 +1,3 @@", lines: [" fn main() {", "-    let n = 0;", "+    let n = 1;", " }"] },
          { id: "h2", file: "src/a.rs", header: "@@ -9,2 +9,2 @@", lines: ["-old();", "+new();"] },
        ] },
      ]));
      await say(page, "replay edit.jsonl");
      const card = page.getByRole("group", { name: /Allow edit/ });
      await card.waitFor();
      // Reasoning is folded; opening it shows the text.
      const fold = page.getByRole("button", { name: /Reasoning/ });
      assert((await page.getByText("off-by-one").count()) === 0, "reasoning starts folded");
      await fold.click();
      await page.getByText("The test fails because of the off-by-one.").waitFor();
      // The tool's output is clipped, "Show all" shows the rest.
      assert((await page.getByText("line 40").count()) === 0, "long output is clipped");
      await page.getByRole("button", { name: "Show all (40 lines)" }).click();
      await page.getByText("line 40").waitFor();
      // The hunks are drawn as diffs.
      assert((await card.locator(".dl.add").count()) === 2 && (await card.locator(".dl.del").count()) === 2, "diff lines coloured");
      await shoot(page, "session-approval-phone");
      await page.emulateMedia({ colorScheme: "dark" });
      await shoot(page, "session-approval-phone-dark");
      await page.emulateMedia({ colorScheme: "light" });
      await card.getByLabel(/Apply src\/a.rs @@ -9,2/).uncheck();
      await card.getByRole("button", { name: "Allow 1 of 2" }).click();
      await page.getByText("ran edit src/a.rs").waitFor();
      await eventually(async () => (await page.getByRole("group", { name: /Allow edit/ }).count()) === 0, "the card leaves");
      const approve = sent.find((f) => f.op === "approve");
      assert(approve && approve.session === session && approve.call_id === "c1" && approve.decision === "allow", `approve sent: ${JSON.stringify(approve)}`);
      assert(JSON.stringify(approve.hunks) === '["h1"]' && approve.always === undefined, `only the chosen hunk: ${JSON.stringify(approve)}`);
      await shoot(page, "session-live-phone");
      noProblems(page);
    },
  },
  {
    name: "approve <cmd> shows a card that Allow answers; mode selector and slash commands",
    async run(ctx) {
      const { dir, page, sent } = await setup(ctx, DESKTOP);
      await say(page, "approve make deploy");
      const card = page.getByRole("group", { name: /Allow bash/ });
      await card.getByText("make deploy").waitFor();
      await page.locator('[data-testid="session-state"]', { hasText: "waiting for you" }).waitFor();
      await card.getByRole("button", { name: "Allow", exact: true }).click();
      await page.getByText("ran make deploy").waitFor();
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      // The approval mode.
      await page.getByLabel("Approval mode").selectOption("auto-edit");
      await eventually(async () => (await page.getByLabel("Approval mode").inputValue()) === "auto-edit", "the mode the engine reports");
      assert(sent.some((f) => f.op === "set_approval_mode" && f.mode === "auto-edit"), "set_approval_mode sent");
      // Slash commands from command_list.
      await page.getByLabel("Message").fill("/m");
      await page.getByRole("option", { name: /\/model/ }).waitFor();
      await page.getByLabel("Message").press("Enter");
      assert((await page.getByLabel("Message").inputValue()) === "/model", "Enter picks the command");
      await page.getByLabel("Message").press("Enter");
      await page.getByText("command: /model").waitFor();
      assert(sent.some((f) => f.op === "command" && f.input === "/model"), "command op sent");
      // An approval that offers scopes for "always".
      writeFileSync(join(dir, "scoped.jsonl"), jsonl([
        { type: "_approval", call_id: "c9", name: "bash", summary: "cargo test", subagent_id: null, hunks: null, scopes: ["session", "rule"] },
      ]));
      await say(page, "replay scoped.jsonl");
      const scoped = page.getByRole("group", { name: /Allow bash/ });
      await scoped.getByRole("button", { name: "Always allow (session)" }).waitFor();
      await scoped.getByRole("button", { name: "Always allow (rule)" }).click();
      await page.getByText("ran cargo test").waitFor();
      const always = sent.find((f) => f.op === "approve" && f.call_id === "c9");
      assert(always.always === true && always.always_scope === "rule" && always.hunks === undefined, `always with its scope: ${JSON.stringify(always)}`);
      await shoot(page, "session-live-desktop");
      noProblems(page);
    },
  },
  {
    name: "a queued message shows as pending, Steer starts it, Stop interrupts",
    async run(ctx) {
      const { page } = await setup(ctx, DESKTOP);
      await say(page, "sleep 8000");
      await page.getByRole("button", { name: "Stop" }).waitFor();
      await say(page, "queued one");
      const pending = page.getByLabel("Queued messages");
      await pending.getByText("queued one").waitFor();
      await page.getByRole("button", { name: "Steer" }).click();
      await page.getByText("echo: queued one").waitFor();
      await eventually(async () => (await page.getByLabel("Queued messages").count()) === 0, "the queue empties");
      await say(page, "sleep 8000");
      await page.locator('[data-testid="session-state"]', { hasText: "working" }).waitFor();
      await page.getByRole("button", { name: "Stop" }).click();
      await page.getByText("request interrupted").waitFor();
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      noProblems(page);
    },
  },
  {
    name: "a daemon restart mid-session: the page reconnects, reopens and shows the transcript once",
    async run(ctx) {
      const { daemon, page, session } = await setup(ctx, DESKTOP);
      await say(page, "first words");
      await page.getByText("echo: first words").waitFor();
      await say(page, "second words");
      await page.getByText("echo: second words").waitFor();
      const rows = () => page.locator(".vrow").allInnerTexts();
      assert((await rows()).length === 4, `four items before: ${await rows()}`);
      await daemon.stop();
      await page.locator('[data-state="reconnecting"]').waitFor();
      const again = await startDaemon(ctx.home, { port: daemon.port });
      ctx.cleanup.push(() => again.stop());
      await page.locator('[data-state="reconnecting"]').waitFor({ state: "detached", timeout: 20000 });
      // Reopened by the page (it was running before the drop), then the transcript replaces.
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor({ timeout: 20000 });
      const d2 = await desk(again);
      ctx.cleanup.push(() => d2.close());
      const list = await d2.request("session_list");
      assert(list.sessions.find((s) => s.session === session)?.open === true, "the session runs again");
      await new Promise((r) => setTimeout(r, 800));
      const after = await rows();
      assert(after.length === 4, `four items after, no duplicates: ${JSON.stringify(after)}`);
      assert(after.filter((t) => t.includes("echo: first words")).length === 1, "once each");
      await say(page, "third words");
      await page.getByText("echo: third words").waitFor();
      assert((await rows()).length === 6, "the conversation goes on");
      noProblems(page);
    },
  },
  {
    name: "a hostile transcript and title run nothing",
    async run(ctx) {
      const { daemon, dir, page, d, session } = await setup(ctx, DESKTOP, { open: false });
      await page.addInitScript(() => { window.__pwned = 0; });
      const evil = [
        "<script>window.__pwned = 1</script>",
        '<img src=x onerror="window.__pwned = 2">',
        "[click me](javascript:window.__pwned=3)",
        '<svg onload="window.__pwned = 4"><circle r="4"/></svg>',
        "[also](  JaVaScRiPt:alert(1))",
        '<a href="javascript:alert(1)">raw link</a>',
      ].join("\n\n");
      writeFileSync(join(dir, "evil.jsonl"), jsonl([
        { type: "assistant_start" },
        { type: "assistant_delta", delta: evil },
        { type: "tool_start", call_id: "e1", name: '<img src=x onerror="window.__pwned=5">' },
        { type: "tool_output", call_id: "e1", name: "bash", output: evil, is_error: false },
        { type: "reasoning_delta", delta: evil },
        { type: "info", message: '<svg onload="window.__pwned=6">' },
        { type: "_save", item: { role: "assistant", content: evil } },
      ]));
      d.send("session_meta", { session, title: '<img src=x onerror="window.__pwned=7"><script>window.__pwned=8</script>' });
      await page.goto(daemon.localLink(`/remote/s/${session}`));
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      await say(page, "replay evil.jsonl");
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      await page.locator(".tool .out").first().waitFor();
      await page.getByRole("button", { name: /Reasoning/ }).click();
      await page.locator(".sv-side .srow .title", { hasText: "<script>window.__pwned=8</script>" }).waitFor();
      const seen = await page.evaluate(() => ({
        pwned: window.__pwned,
        jsHrefs: [...document.querySelectorAll("[href]")].filter((a) => /^\s*javascript:/i.test(a.getAttribute("href"))).length,
        handlers: [...document.querySelectorAll("*")].filter((el) => [...el.attributes].some((at) => /^on/i.test(at.name))).length,
        inlineScripts: [...document.querySelectorAll("script")].filter((x) => !x.src).length,
        svg: document.querySelectorAll("main svg").length,
        imgs: [...document.querySelectorAll("img")].filter((i) => !i.src.startsWith("data:")).length,
        text: document.querySelector(".assistant")?.textContent ?? "",
      }));
      assert(seen.pwned === 0, `a script ran: ${seen.pwned}`);
      assert(seen.jsHrefs === 0 && seen.handlers === 0 && seen.inlineScripts === 0 && seen.svg === 0 && seen.imgs === 0, `hostile markup in the DOM: ${JSON.stringify(seen)}`);
      assert(seen.text.includes("<script>") && seen.text.includes("click me"), `the text is shown as text: ${seen.text}`);
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Sessions" }).click();
      await page.locator(".srow .title", { hasText: "<script>window.__pwned=8</script>" }).waitFor();
      const title = await page.evaluate(() => ({ pwned: window.__pwned, imgs: document.querySelectorAll("img").length }));
      assert(title.pwned === 0 && title.imgs === 0, `the title ran: ${JSON.stringify(title)}`);
      noProblems(page);
    },
  },
  {
    name: "a 5,000-item transcript is windowed and scrolls to its top",
    async run(ctx) {
      const { d, dir, page, session } = await setup(ctx, DESKTOP);
      const lines = [];
      for (let i = 0; i < 5000; i++)
        lines.push({ type: "_save", item: i % 2 ? { role: "assistant", content: `item ${i}: **answer** with some text` } : { role: "user", content: `item ${i}` } });
      writeFileSync(join(dir, "big.jsonl"), jsonl(lines));
      await say(page, "replay big.jsonl");
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      d.send("session_close", { session });
      await page.getByTestId("closed-note").waitFor();
      const t0 = Date.now();
      await page.getByRole("button", { name: "Open", exact: true }).click();
      await page.getByText("item 4999: answer").waitFor();
      const drawnMs = Date.now() - t0;
      const count = await page.locator("[data-item]").count();
      assert(count > 0 && count < 200, `only rows near the viewport are in the DOM: ${count}`);
      const total = await page.evaluate(() => document.querySelector(".vscroll").scrollHeight);
      assert(total > 5000 * 30, `the scroll height stands for all 5,001 rows: ${total}`);
      // Scroll to the top (row heights settle as they are measured).
      await eventually(async () => {
        await page.evaluate(() => { document.querySelector(".vscroll").scrollTop = 0; });
        return (await page.locator(".vrow", { hasText: /^replay big\.jsonl$/ }).count()) === 1 && (await page.getByText("item 0", { exact: true }).count()) === 1;
      }, "the first rows at the top");
      const top = await page.locator("[data-item]").count();
      assert(top < 200, `still windowed at the top: ${top}`);
      // A frame-time probe: scrolling through the middle stays smooth enough.
      const ms = await page.evaluate(async () => {
        const el = document.querySelector(".vscroll");
        const t = performance.now();
        for (let i = 1; i <= 20; i++) {
          el.scrollTop = (el.scrollHeight * i) / 21;
          await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        }
        return (performance.now() - t) / 20;
      });
      console.log(`  5,001 items: drawn ${drawnMs} ms after Open, ${count} rows in the DOM, ${ms.toFixed(1)} ms per scroll jump`);
      assert(ms < 250, `a scroll jump takes ${ms} ms`);
      noProblems(page);
    },
  },
  {
    name: "the session list: create in a project and as a chat, state, archive, group, hide, close and open",
    async run(ctx) {
      const { daemon, d, page } = await setup(ctx, PHONE, { open: false });
      const app = ctx.home.project("app");
      await d.request("project_add", { path: app, project_name: "app" });
      const other = await d.request("session_create", { cwd: ctx.home.project("backend") });
      d.send("session_meta", { session: other.session, group: "Backend", title: "Fix the API" });
      // An unwatched session defers its approval: it shows "to decide".
      d.send("user_message", { session: other.session, content: "approve rm -rf build" });
      await page.goto(daemon.localLink("/remote"));
      const row = page.locator(".srow", { hasText: "Fix the API" });
      await row.getByText("1 to decide").waitFor();
      await page.getByRole("heading", { name: "Backend" }).waitFor();
      await row.locator(".meta", { hasText: "jucode" }).waitFor();
      // Create in a project from the workspaces list.
      await page.getByRole("button", { name: "New session" }).click();
      assert((await page.getByLabel("Project", { exact: true }).inputValue()).endsWith("/app"), "the project is picked");
      await shoot(page, "session-list-create-phone");
      await page.getByRole("button", { name: "Create" }).click();
      await eventually(() => /\/remote\/s\//.test(page.url()), "the new session opens");
      await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
      await say(page, "sleep 4000");
      await page.getByRole("link", { name: "All sessions" }).click();
      await page.locator(".srow", { hasText: "sleep 4000" }).getByText("running").waitFor();
      // A chat.
      await page.getByRole("button", { name: "New session" }).click();
      await page.getByLabel("A chat").check();
      await page.getByRole("button", { name: "Create" }).click();
      await eventually(() => /\/remote\/s\//.test(page.url()), "the chat opens");
      await page.getByRole("link", { name: "All sessions" }).click();
      await eventually(async () => (await page.locator(".srow", { hasText: "New chat" }).count()) === 1, "the chat is listed");
      await shoot(page, "session-list-phone");
      // Archive and unarchive.
      await row.locator("summary").click();
      await row.getByRole("button", { name: "Archive" }).click();
      await eventually(async () => (await page.locator(".srow", { hasText: "Fix the API" }).count()) === 0, "archived away");
      await page.getByRole("tab", { name: /Archived/ }).click();
      const arch = page.locator(".srow", { hasText: "Fix the API" });
      await arch.locator("summary").click();
      await arch.getByRole("button", { name: "Unarchive" }).click();
      await page.getByRole("tab", { name: /Active/ }).click();
      await row.waitFor();
      // Close, then open again.
      await row.locator("summary").click();
      await row.getByRole("button", { name: "Close" }).click();
      await row.getByText("closed").waitFor();
      await row.locator("summary").click();
      await row.getByRole("button", { name: "Open" }).click();
      await eventually(async () => (await d.request("session_list")).sessions.find((s) => s.session === other.session)?.open === true, "opened");
      // Group by hand.
      await row.locator("summary").click();
      await row.getByRole("button", { name: "Group…" }).click();
      await page.getByLabel(/Group of/).fill("Later");
      await page.getByRole("button", { name: "Save" }).click();
      await page.getByRole("heading", { name: "Later" }).waitFor();
      const desktop = await newPage(ctx.browser, DESKTOP);
      await desktop.goto(daemon.localLink("/remote"));
      await desktop.getByRole("heading", { name: "Later" }).waitFor();
      await shoot(desktop, "session-list-desktop");
      // Hide.
      await row.locator("summary").click();
      await row.getByRole("button", { name: "Hide" }).click();
      await eventually(async () => (await page.locator(".srow", { hasText: "Fix the API" }).count()) === 0, "hidden");
      await eventually(async () => (await desktop.locator(".srow", { hasText: "Fix the API" }).count()) === 0, "hidden on the other page too");
      await desktop.locator(".srow-main").first().click();
      await desktop.locator(".sv-side .srow").first().waitFor();
      await shoot(desktop, "session-live-desktop-list");
      noProblems(page);
      noProblems(desktop);
    },
  },
];
