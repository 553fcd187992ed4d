// Terminals: a shell on the computer in xterm, opened from a session (desktop) and by its
// address (phone), under the embedded page's real Content-Security-Policy (set as a meta policy
// here, since `--web` serves without one): type, see the output, resize, exit.
import { DESKTOP, PHONE, assert, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
  "worker-src 'self'; manifest-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; " +
  "frame-ancestors 'none'; object-src 'none'";

async function withCsp(page) {
  if (process.env.NO_CSP) return;
  // As a <meta> set before any script runs: a document fulfilled by page.route counts as
  // public to Chromium, which then refuses its WebSocket to loopback. (frame-ancestors has
  // no meaning in a meta policy and is left out.)
  const policy = CSP.replace("; frame-ancestors 'none'", "");
  // Parsing is done at "interactive", and the page's module scripts have not run yet.
  await page.addInitScript((p) => {
    document.addEventListener("readystatechange", () => {
      if (document.readyState !== "interactive") return;
      const meta = document.createElement("meta");
      meta.httpEquiv = "Content-Security-Policy";
      meta.content = p;
      document.head.prepend(meta);
    });
  }, policy);
}

/** The terminal's text as xterm's DOM renderer draws it. */
function screenText(page) {
  return page.evaluate(() => document.querySelector(".xterm-rows")?.textContent ?? "");
}

async function sizeOf(page, tag) {
  await page.keyboard.type(`stty size; echo "${tag}-$((40+2))"\n`);
  const text = await eventually(async () => {
    const t = await screenText(page);
    return t.includes(`${tag}-42`) ? t : null;
  }, `the output of stty size (${tag})`);
  const all = [...text.matchAll(new RegExp(`(\\d+) (\\d+)\\s*${tag}-42`, "g"))];
  const m = all.at(-1);
  return m ? `${m[1]} ${m[2]}` : null;
}

export const scenarios = [
  {
    name: "a terminal opens from a session, echoes, resizes and shows its exit",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const cwd = home.project("demo");
      const created = await d.request("session_create", { cwd });
      const page = await newPage(browser, DESKTOP);
      await withCsp(page);
      await page.goto(daemon.localLink(`/remote/s/${created.session}`));
      await page.getByRole("button", { name: "Open a terminal in this session's directory" }).click();
      await eventually(() => page.url().includes("/remote/term/"), "the terminal route");
      await page.locator(".xterm-rows").waitFor();
      assert(process.env.NO_CSP || (await page.locator('meta[http-equiv="Content-Security-Policy"]').count()) === 1, "the policy is in force");
      // The grid got its dimensions although the policy forbids style elements.
      const rowHeight = await page.evaluate(() => document.querySelector(".xterm-rows > div")?.getBoundingClientRect().height ?? 0);
      assert(rowHeight > 8, `a terminal row is ${rowHeight}px high`);
      await page.locator(".term-box").click();
      await page.keyboard.type('echo "hi-$((1+2))"\n');
      await eventually(async () => (await screenText(page)).includes("hi-3"), "the echo's output");
      const before = await sizeOf(page, "wide");
      await shoot(page, "terminals-view-desktop");
      await page.setViewportSize({ width: 700, height: 600 });
      await page.waitForTimeout(300);
      await page.keyboard.type("clear\n");
      const after = await sizeOf(page, "narrow");
      assert(before && after && before !== after, `the size did not follow the window: ${before} → ${after}`);
      await page.keyboard.type("exit 4\n");
      await page.getByText("The shell exited with code 4.").waitFor();
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "a phone types with the extra keys and ends the shell with Ctrl-D",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const cwd = home.project("demo");
      await d.request("session_create", { cwd });
      const page = await newPage(browser, PHONE);
      await withCsp(page);
      await page.goto(daemon.localLink(`/remote/term/${encodeURIComponent(cwd)}`));
      await page.locator(".xterm-rows").waitFor();
      await page.locator(".term-box").click();
      await page.keyboard.type('echo "phone-$((2+3))"\n');
      await eventually(async () => (await screenText(page)).includes("phone-5"), "the phone's output");
      const keys = page.getByRole("toolbar", { name: "Extra keys" });
      await keys.getByRole("button", { name: "Escape" }).waitFor();
      await shoot(page, "terminals-view-phone");
      // Ctrl applies to the next key only: Ctrl then d is EOF at an empty prompt.
      await keys.getByRole("button", { name: /^Control/ }).click();
      await page.keyboard.type("d");
      await page.getByText(/The shell exited with code 0\./).waitFor();
      await shoot(page, "terminals-exit-phone");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
];
