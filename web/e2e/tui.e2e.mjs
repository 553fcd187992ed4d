// The TUI hand-off: "Open in terminal" on a jucode session runs `jucode-daemon tui --resume`
// on the opener's pty (the daemon's built-in engine; its model is unreachable here, which the
// TUI does not need to start), shown in the terminal pane; another screen gets the banner and
// no composer (from the surface frame in its watch snapshot); `/quit` typed in the TUI brings
// both back to the chat.
import { writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

function screenText(page) {
  return page.evaluate(() => document.querySelector(".xterm-rows")?.textContent ?? "");
}

export const scenarios = [
  {
    name: "a jucode session opens in its terminal interface, the other screen shows the banner, /quit comes back",
    async run({ browser, home, cleanup }) {
      mkdirSync(home.home, { recursive: true });
      // No model is reached: the port is closed.
      writeFileSync(
        join(home.home, "config.json"),
        JSON.stringify({ protocol: "chat", base_url: "http://127.0.0.1:9/v1", api_key: "x", model: "offline-model", retry_attempts: 0 }),
      );
      const daemon = await startDaemon(home, { builtin: true });
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const cwd = home.project("demo");
      const created = await d.request("session_create", { cwd });
      const sid = created.session;

      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink(`/remote/s/${sid}`));
      await page.getByRole("textbox").first().waitFor();
      await page.getByRole("button", { name: "Open this conversation in its engine's terminal interface" }).click();
      await page.getByTestId("tui-terminal").waitFor();
      await page.locator(".xterm-rows").waitFor();
      await eventually(async () => (await screenText(page)).includes("ready · Enter sends"), "the jucode TUI's status line");
      // The model comes with the engine's startup, which can be drawn after the status line.
      await eventually(async () => (await screenText(page)).includes("offline-model"), "the TUI names the session's model");
      const surface = await d.next((f) => f.type === "surface" && f.session === sid, { seen: true });
      assert(surface.surface === "tui" && typeof surface.term === "string", JSON.stringify(surface));
      // The engine is stopped while the TUI runs, yet the header does not call the session closed.
      await page.locator('[data-testid="session-state"]', { hasText: "in the TUI" }).waitFor();
      await shoot(page, "tui-terminal-desktop");

      const phone = await newPage(browser, PHONE);
      await phone.goto(daemon.localLink(`/remote/s/${sid}`));
      await phone.getByTestId("tui-banner").waitFor();
      assert((await phone.getByRole("button", { name: "Open this conversation in its engine's terminal interface" }).count()) === 0, "no second hand-off offered");
      await phone.locator('[data-testid="session-state"]', { hasText: "in the TUI" }).waitFor();
      await shoot(phone, "tui-banner-phone");

      await page.locator(".term-box").click();
      await page.keyboard.type("/quit");
      await page.keyboard.press("Enter");
      await phone.getByTestId("tui-banner").waitFor({ state: "detached" });
      await page.getByTestId("tui-terminal").waitFor({ state: "detached" });
      await page.getByRole("button", { name: "Open this conversation in its engine's terminal interface" }).waitFor();
      await d.next((f) => f.type === "surface" && f.session === sid && f.surface === "gui", { seen: true });
      await shoot(page, "tui-back-desktop");
      assert(page.problems.length === 0, page.problems.join("\n"));
      assert(phone.problems.length === 0, phone.problems.join("\n"));
    },
  },
];
