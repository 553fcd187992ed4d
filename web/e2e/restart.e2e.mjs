// restart_when_idle from the desktop: the page says the daemon is restarting, and keeps
// saying so (while it tries to reconnect) once the daemon has gone.
import { PHONE, assert, desk, newPage, shoot, startDaemon } from "./harness.mjs";

export const scenarios = [
  {
    name: "the page tells of a daemon restarting and waits for it",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      // A turn that waits for an approval holds the daemon up until the scenario lets it go.
      const created = await d.request("session_create", { cwd: home.project("demo") });
      await d.request("watch", { session: created.session });
      d.send("user_message", { session: created.session, content: "approve make deploy" });
      const approval = await d.next((f) => f.type === "approval_request");
      const page = await newPage(browser, PHONE);
      await page.goto(daemon.localLink());
      await page.getByRole("link", { name: /demo/ }).waitFor();
      d.send("restart_when_idle", {});
      await page.locator('[data-state="restarting"]').waitFor();
      await shoot(page, "restart-pending-phone");
      d.send("approve", { session: created.session, call_id: approval.call_id, decision: "allow" });
      const gone = page.locator('[data-state="reconnecting"]');
      await gone.waitFor();
      const text = await gone.textContent();
      assert(text.includes("The daemon is restarting"), `banner: ${text}`);
      assert(page.problems.every((p) => /WebSocket|ERR_CONNECTION_REFUSED|Failed to load/.test(p)), page.problems.join("\n"));
    },
  },
];
