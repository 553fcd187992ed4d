// Settings: pairing a phone with a code (the desk page makes it, a phone-sized page in another
// browser context trades it), wrong codes, revoking the device, what a paired page may see,
// Web Push as far as headless Chromium allows, and workspaces changed from the page.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DESKTOP, PHONE, assert, auditView, desk, eventually, newPage, shoot, startDaemon, startRelay } from "./harness.mjs";
import { serveBuiltPage } from "./relay.e2e.mjs";

async function audited(page, what) {
  const problems = await auditView(page);
  assert(problems.length === 0, `${what}:\n${problems.join("\n")}`);
}

/** The desk page's pairing code, made from the Settings view. */
async function makeCode(deskPage) {
  await deskPage.getByRole("button", { name: /^(Pair a phone|New code)$/ }).click();
  const code = (await deskPage.getByTestId("pair-code").textContent()).trim();
  assert(/^[A-HJ-NP-Z2-9]{8}$/.test(code), `a code of 8 characters from the daemon's alphabet: ${code}`);
  return code;
}

export const scenarios = [
  {
    name: "a phone pairs with a code, sees the sessions, and is revoked from the desk",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      await d.request("session_create", { cwd: home.project("demo") });

      const deskPage = await newPage(browser, DESKTOP);
      await deskPage.goto(daemon.localLink("/remote/settings"));
      await deskPage.getByTestId("relay-state").getByText("Off").waitFor();
      await deskPage.getByText("No paired devices.").waitFor();
      const code = await makeCode(deskPage);
      const qr = await deskPage.locator("img.qr").getAttribute("src");
      assert(qr.startsWith("data:image/svg+xml,"), "the QR code is an SVG data URL");
      assert(await deskPage.locator("img.qr").evaluate((img) => img.complete && img.naturalWidth > 0), "the QR image decoded");
      const addr = await deskPage.locator(".offer .url").textContent();
      assert(addr === `${daemon.url}/remote?pair=${code}`, `the QR code's address: ${addr}`);
      const first = await deskPage.getByTestId("pair-expiry").textContent();
      assert(/^[45]:\d\d$/.test(first), `about five minutes left: ${first}`);
      await eventually(async () => (await deskPage.getByTestId("pair-expiry").textContent()) !== first, "the countdown to move");
      await deskPage.getByTestId("pairing").scrollIntoViewIfNeeded();
      await shoot(deskPage, "pairing-code-desktop");
      await audited(deskPage, "the desk's settings with a code");

      // The phone: its own browser context, so nothing is shared with the desk page.
      const phone = await newPage(browser, PHONE);
      await phone.goto(`${daemon.url}/remote?pair=${code}`);
      await phone.getByRole("link", { name: /demo/ }).waitFor();
      assert(!phone.url().includes("pair") && !phone.url().includes(code), `the code left the address: ${phone.url()}`);
      const token = await phone.evaluate(() => localStorage.getItem("jucode-device-token"));
      assert(/^[0-9a-f]{64}$/.test(token ?? ""), "the device token is kept in localStorage");
      assert(!phone.url().includes(token), "the token is not in the address");
      assert((await phone.evaluate(() => localStorage.getItem("jucode-daemon-token"))) === null, "the phone has no daemon token");
      await shoot(phone, "pair-phone");

      // The desk page notices the new device on its own (it polls while the code is shown).
      await deskPage.getByText(/^Paired: /).waitFor();
      const listed = await d.request("device_list");
      assert(listed.devices.length === 1, "one device is paired");
      const name = listed.devices[0].name;
      await deskPage.getByTestId("devices").getByText(name).waitFor();

      // What a paired page may see: no pairing, devices or relay; notifications instead.
      await phone.getByRole("link", { name: "Settings" }).click();
      await phone.getByRole("heading", { name: "Notifications" }).waitFor();
      for (const id of ["pairing", "devices", "relay"])
        assert((await phone.getByTestId(id).count()) === 0, `the phone shows no ${id} section`);
      assert((await phone.getByRole("button", { name: /Pair a phone|Revoke|relay on/ }).count()) === 0, "no local-only controls");
      // The daemon's origin has no push key (that path answers with the page), so the page says
      // notifications need the relay and does not offer to enable them.
      await phone.getByTestId("push-why").getByText(/need the relay/).waitFor();
      assert(await phone.getByRole("button", { name: "Enable notifications" }).isDisabled(), "enable is off without a key");
      // push_test for a device without subscriptions: an empty result list, said plainly.
      await phone.getByRole("button", { name: "Send a test" }).click();
      await phone.getByTestId("push-results").getByText(/no notification subscription/).waitFor();
      // The service worker is registered for /remote/.
      const scope = await eventually(
        () => phone.evaluate(async () => (await navigator.serviceWorker.getRegistration("/remote/"))?.scope ?? ""),
        "the service worker registration",
      );
      assert(scope === `${daemon.url}/remote/`, `the service worker's scope: ${scope}`);
      await phone.evaluate(() => window.scrollTo(0, 0));
      await shoot(phone, "settings-phone");
      await audited(phone, "the phone's settings");

      // Revoke from the desk: click, confirm.
      await deskPage.getByRole("button", { name: `Revoke ${name}` }).click();
      await deskPage.getByRole("group", { name: `Revoke ${name}?` }).getByRole("button", { name: "Revoke" }).click();
      await deskPage.getByText(`Revoked ${name}.`).waitFor();
      await deskPage.getByText("No paired devices.").waitFor();
      assert((await d.request("device_list")).devices.length === 0, "the device is gone from the list");

      // The phone is told at once (close 1008 "device revoked").
      await phone.locator('[data-state="revoked"]').waitFor();
      await shoot(phone, "revoked-phone");
      // Reloaded with the dead token, the page learns only that it was refused.
      await phone.reload();
      await phone.locator('[data-state="refused"]').waitFor();
      // Forgetting brings the welcome screen back, ready for a new code.
      await shoot(phone, "revoked-refused-phone");
      await phone.getByRole("button", { name: "Forget and pair again" }).click();
      await phone.getByLabel("Pairing code").waitFor();
      assert((await phone.evaluate(() => localStorage.getItem("jucode-device-token"))) === null, "the token is forgotten");
      const again = await makeCode(deskPage);
      await phone.getByLabel("Pairing code").fill(again.toLowerCase());
      await phone.getByRole("button", { name: "Pair" }).click();
      await phone.getByRole("link", { name: /demo/ }).waitFor();
      assert((await d.request("device_list")).devices.length === 1, "paired again");

      assert(deskPage.problems.length === 0, deskPage.problems.join("\n"));
      assert(phone.problems.length === 0, phone.problems.join("\n"));
    },
  },
  {
    name: "wrong codes are told apart from too many attempts, and a right code typed in pairs",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      await d.request("session_create", { cwd: home.project("demo") });

      const phone = await newPage(browser, PHONE);
      // Wrong code number 1, from the address.
      await phone.goto(`${daemon.url}/remote?pair=WRONGCDE`);
      await phone.getByTestId("pair-error").getByText(/wrong or has expired/).waitFor();
      assert(!phone.url().includes("WRONG"), "the code left the address");
      assert((await phone.getByLabel("Pairing code").inputValue()) === "WRONGCDE", "the code is kept in the field to correct");
      await shoot(phone, "settings-wrong-code-phone");
      // A right code, typed (lower case, with a space) into the form, pairs in place.
      const { code } = await d.request("pair_start");
      await phone.getByLabel("Pairing code").fill(`${code.slice(0, 4).toLowerCase()} ${code.slice(4)}`);
      assert((await phone.getByLabel("Pairing code").inputValue()) === code, "the field keeps only the code's characters");
      await phone.getByRole("button", { name: "Pair" }).click();
      await phone.getByRole("link", { name: /demo/ }).waitFor();
      // A used code is as wrong as any other.
      const other = await newPage(browser, PHONE);
      await other.goto(`${daemon.url}/remote?pair=${code}`);
      await other.getByTestId("pair-error").getByText(/wrong or has expired/).waitFor();
      // Wrong codes 3 to 5 are still "wrong"; the sixth attempt in the minute is "too many".
      for (let i = 3; i <= 5; i++) {
        await other.getByLabel("Pairing code").fill(`WRONG${i}AA`);
        await other.getByRole("button", { name: "Pair" }).click();
        await eventually(async () => (await other.getByRole("button", { name: "Pair" }).isEnabled()), "the form to answer");
        await other.getByTestId("pair-error").getByText(/wrong or has expired/).waitFor();
      }
      await other.getByLabel("Pairing code").fill("WRONG6AA");
      await other.getByRole("button", { name: "Pair" }).click();
      await other.getByTestId("pair-error").getByText(/Too many wrong codes/).waitFor();
      assert((await other.evaluate(() => localStorage.getItem("jucode-device-token"))) === null, "no token after failures");
      assert(phone.problems.length === 0, phone.problems.join("\n"));
      assert(other.problems.length === 0, other.problems.join("\n"));
    },
  },
  {
    name: "projects added, created, renamed and removed in the page reach a desk client",
    async run({ browser, home, cleanup }) {
      const daemon = await startDaemon(home);
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const page = await newPage(browser, DESKTOP);
      await page.goto(daemon.localLink("/remote/settings"));
      await page.getByText("No projects yet.").waitFor();
      await page.getByTestId("relay").getByText(/--no-relay/).waitFor();

      const alpha = home.project("alpha");
      await page.getByText("Add an existing folder").click();
      const added = d.next((f) => f.type === "workspaces" && JSON.stringify(f.workspaces).includes(alpha));
      await page.getByLabel("Folder", { exact: true }).fill(alpha);
      await page.getByRole("button", { name: "Add project" }).click();
      const w1 = await added;
      assert(w1.id === undefined, "the desk got it as a broadcast");
      await page.getByTestId("workspaces").getByText(alpha, { exact: true }).waitFor();
      await page.getByText("Added alpha.").waitFor();
      // The same folder again: the daemon's error, shown.
      await page.getByLabel("Folder", { exact: true }).fill(alpha);
      await page.getByRole("button", { name: "Add project" }).click();
      await page.getByTestId("workspaces").getByRole("alert").getByText(/already a project/).waitFor();

      const created = d.next((f) => f.type === "workspaces" && JSON.stringify(f.workspaces).includes("fresh"));
      await page.getByText("Create a new project").click();
      await page.getByLabel("In the folder").fill(home.root);
      await page.getByLabel("New folder name").fill("fresh");
      await page.getByRole("button", { name: "Create project" }).click();
      const w2 = await created;
      assert(w2.rev === w1.rev + 1, "one more revision");
      await page.getByTestId("workspaces").getByText(`${home.root}/fresh`, { exact: true }).waitFor();

      const ws = w2.workspaces[0];
      const renamed = d.next((f) => f.type === "workspaces" && f.workspaces[0]?.name === "Work");
      await page.getByRole("button", { name: `Rename workspace ${ws.name}` }).click();
      await page.getByLabel("Workspace name").fill("Work");
      await page.getByRole("button", { name: "Save" }).click();
      await renamed;
      await page.getByRole("heading", { level: 3, name: "Work default" }).waitFor();
      await shoot(page, "settings-desktop");
      await audited(page, "the desk's settings with projects");

      const removed = d.next((f) => f.type === "workspaces" && !JSON.stringify(f.workspaces).includes(alpha));
      await page.getByRole("button", { name: "Remove project alpha" }).click();
      await page.getByRole("group", { name: "Remove alpha?" }).getByRole("button", { name: "Remove" }).click();
      const w4 = await removed;
      assert(w4.workspaces[0].projects.length === 1, "fresh stays");
      await eventually(async () => (await page.getByTestId("workspaces").getByText(alpha, { exact: true }).count()) === 0, "alpha to leave the page");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "through a relay with push: the relay link as a QR code, the push key found, subscribing tried",
    async run({ browser, home, cleanup }) {
      const relay = await startRelay(home, { args: ["--vapid-key", join(home.root, "vapid.key")] });
      cleanup.push(() => relay.stop());
      const daemon = await startDaemon(home, { relay: relay.ws });
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const key = await (await fetch(`${relay.url}/relay/v1/push/key`)).json();
      assert(typeof key.key === "string", "the relay serves a VAPID key");

      const deskPage = await newPage(browser, DESKTOP);
      await deskPage.goto(daemon.localLink("/remote/settings"));
      await deskPage.getByRole("button", { name: "Turn the relay on" }).click();
      await deskPage.getByTestId("relay-state").getByText(/^On, connected as /).waitFor();
      await deskPage.getByRole("button", { name: "Relay link" }).click();
      const link = await deskPage.locator(".offer .url").textContent();
      assert(link.startsWith(`${relay.url}/remote#pair=`), `the relay link: ${link}`);
      assert(await deskPage.getByAltText("QR code of the relay pairing link").isVisible(), "the relay link's QR code");
      await deskPage.getByTestId("pairing").scrollIntoViewIfNeeded();
      await shoot(deskPage, "settings-relay-link-desktop");

      const phone = await newPage(browser, PHONE);
      // `build.mjs --out` now lays the files out under remote/ (for --web); serveBuiltPage
      // wants the directory that holds app.js.
      const web = process.env.JUCODE_WEB_DIR;
      if (web) await serveBuiltPage(phone, relay.url, existsSync(join(web, "remote", "app.js")) ? join(web, "remote") : web);
      // (One call with every permission: a second grant for the origin replaces the first.)
      await phone.context().grantPermissions(["notifications", ...(process.env.JUCODE_WEB_DIR ? ["local-network-access"] : [])], { origin: relay.url });
      await phone.goto(link);
      await phone.getByRole("link", { name: "Settings" }).click();
      await phone.getByRole("heading", { name: "Notifications" }).waitFor();
      assert((await phone.getByTestId("pairing").count()) === 0, "no pairing section through the relay");
      await deskPage.getByText(/^Paired: /).waitFor();
      // The relay's origin has the key, so enabling is offered; headless Chromium has no push
      // service, so subscribing fails or never settles (it hangs here; the page gives up after
      // 10 s), and the page says so instead of claiming success.
      const enable = phone.getByRole("button", { name: "Enable notifications" });
      await eventually(() => enable.isEnabled(), "enable to be offered");
      assert((await phone.getByTestId("push-why").count()) === 0, "no 'needs the relay' note on the relay's origin");
      await enable.click();
      await phone.getByTestId("push-results").getByRole("alert").getByText(/push service (refused|did not answer)/).waitFor({ timeout: 15_000 });
      await phone.getByTestId("notifications").scrollIntoViewIfNeeded();
      await shoot(phone, "settings-push-relay-phone");
      await phone.getByRole("button", { name: "Send a test" }).click();
      await phone.getByTestId("push-results").getByText(/no notification subscription/).waitFor();
      assert(deskPage.problems.length === 0, deskPage.problems.join("\n"));
      // Chromium itself logs why subscribing fails here (a fresh context counts as incognito).
      const own = phone.problems.filter((p) => !/does not support the Push API in incognito mode/.test(p));
      assert(own.length === 0, own.join("\n"));
    },
  },
];
