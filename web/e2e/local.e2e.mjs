// The desktop's local link: the token in the fragment, a session created on the desk and
// driven from the page.
import { DESKTOP, PHONE, assert, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

export const scenarios = [
  {
    name: "a local link connects, forgets the fragment and runs a session",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const created = await d.request("session_create", { cwd: home.project("demo") });
      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink());
      // The token left the address bar at once; it is kept in localStorage only.
      assert(!page.url().includes("token"), `the URL still holds the token: ${page.url()}`);
      const kept = await page.evaluate(() => localStorage.getItem("jucode-daemon-token"));
      assert(kept === daemon.token(), "the token is kept in localStorage");
      await page.getByRole("link", { name: /demo/ }).click();
      await eventually(() => page.url().endsWith(`/remote/s/${created.session}`), "the session route");
      await page.getByLabel("Message").fill("hello there");
      await page.getByRole("button", { name: "Send" }).click();
      await page.getByText("echo: hello there").waitFor();
      await shoot(page, "session-desktop");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "a page without a token says how to get in",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const page = await newPage(browser, PHONE);
      await page.goto(`${daemon.url}/remote`);
      await page.getByLabel("Pairing code").waitFor();
      await shoot(page, "welcome-phone");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
];
