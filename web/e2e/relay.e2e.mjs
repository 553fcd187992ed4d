// The phone through the self-hosted relay: a pair link opened from the relay's origin, the
// Noise handshake in Chromium, a session run end to end, a reload that reconnects without a
// code, and a revoke on the desk that the page reports.
//
// The relay serves the page embedded in its binary. With JUCODE_WEB_DIR set (a page built from
// a work tree), the page's files are answered from that directory instead, keeping the relay's
// own headers (its Content-Security-Policy); in CI, without it, the embedded page is tested.
import { existsSync, readFileSync } from "node:fs";
import { extname, join, normalize } from "node:path";
import { PHONE, assert, desk, eventually, newPage, shoot, startDaemon, startRelay } from "./harness.mjs";

const TYPES = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".svg": "image/svg+xml",
  ".webmanifest": "application/manifest+json",
};

/** Answers `<relay>/remote…` from `dir`, with the relay's real response headers. */
export async function serveBuiltPage(page, relayUrl, dir) {
  const origin = new URL(relayUrl).origin;
  // A page answered by Playwright is not known to come from loopback, so Chromium's local
  // network access checks would block its socket to the (loopback) relay; the relay's own
  // page needs no such grant.
  await page.context().grantPermissions(["local-network-access"], { origin });
  await page.context().route(
    (url) => url.origin === origin && (url.pathname === "/remote" || url.pathname.startsWith("/remote/")),
    async (route) => {
      const path = new URL(route.request().url()).pathname.slice("/remote".length).replace(/^\/+/, "");
      const name = extname(path) ? normalize(path) : "index.html";
      // `build.mjs --out DIR` lays the files out for `--web`: under DIR/remote/.
      const file = join(dir, "remote", name);
      if (name.startsWith("..") || !existsSync(file)) return route.fulfill({ status: 404, body: "not found" });
      const real = await route.fetch();
      await route.fulfill({
        response: real,
        body: readFileSync(file),
        headers: { ...real.headers(), "content-type": TYPES[extname(name)] ?? "application/octet-stream" },
      });
    },
  );
}

async function relayOn(d) {
  await d.request("relay_set", { enabled: true });
  return eventually(async () => {
    const s = await d.request("relay_status");
    return s.connected && s.host ? s : null;
  }, "the daemon connected to the relay");
}

export const scenarios = [
  {
    name: "a phone pairs through the relay, runs a session, reconnects without a code and sees the revoke",
    async run({ browser, home, cleanup }) {
      const relay = await startRelay(home);
      cleanup.push(() => relay.stop());
      const daemon = await startDaemon(home, { relay: relay.ws });
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      const status = await relayOn(d);
      assert(status.url === relay.ws, `relay_status url ${status.url}`);
      const created = await d.request("session_create", { cwd: home.project("demo") });
      const { link, code } = await d.request("pair_link");
      assert(link.startsWith(`${relay.url}/remote#pair=${status.host}.`), `the link points at the relay: ${link}`);

      const page = await newPage(browser, PHONE);
      if (process.env.JUCODE_WEB_DIR) await serveBuiltPage(page, relay.url, process.env.JUCODE_WEB_DIR);
      // Every WebSocket the page opens goes to the relay, never to the daemon.
      const sockets = [];
      // The size of each stream's first message (msg1): it shows whether a code was sent.
      const msg1 = [];
      page.on("websocket", (ws) => {
        sockets.push(ws.url());
        let first = true;
        ws.on("framesent", (f) => {
          if (first) msg1.push(typeof f.payload === "string" ? -1 : f.payload.length);
          first = false;
        });
      });
      await page.goto(link);

      await page.getByRole("link", { name: /demo/ }).waitFor();
      assert(!page.url().includes("pair="), `the fragment was not cleared: ${page.url()}`);
      const kept = await page.evaluate(() => ({
        host: JSON.parse(localStorage.getItem("jucode-relay-host") ?? "null"),
        device: JSON.parse(localStorage.getItem("jucode-relay-device") ?? "null"),
        all: Object.keys(localStorage).map((k) => localStorage.getItem(k)),
      }));
      assert(kept.host?.host_id === status.host, `host record ${JSON.stringify(kept.host)}`);
      assert(kept.host.relay === relay.ws, `relay in the host record: ${kept.host.relay}`);
      assert(link.includes(`.${kept.host.host_static_pub}.`), "the host key from the link is kept");
      assert(/^[A-Za-z0-9_-]{43}$/.test(kept.device?.pub ?? "") && /^[A-Za-z0-9_-]{43}$/.test(kept.device?.priv ?? ""), "a device key");
      assert(!kept.all.some((v) => v?.includes(code)), "the pairing code is not kept");
      assert(sockets.length >= 1 && sockets.every((u) => u.startsWith(`${relay.ws}/connect?host=${status.host}`)), `sockets: ${sockets.join(", ")}`);

      // The daemon paired the device through the relay.
      const devices = (await d.request("device_list")).devices.filter((x) => x.kind === "relay");
      assert(devices.length === 1, `relay devices: ${JSON.stringify(devices)}`);
      assert(/^Browser on /.test(devices[0].name), `device name ${devices[0].name}`);

      await page.getByRole("link", { name: /demo/ }).click();
      await eventually(() => page.url().endsWith(`/remote/s/${created.session}`), "the session route");
      await page.getByLabel("Message").fill("hello");
      await page.getByRole("button", { name: "Send" }).click();
      await page.getByText("echo: hello").waitFor();
      await shoot(page, "relay-session-phone");

      // A reload: no fragment, the kept key, no code; the same single device.
      const before = sockets.length;
      await page.goto(`${relay.url}/remote`);
      // (The session may be titled after its first message by now: find it by its address.)
      await page.locator(`a[href="/remote/s/${created.session}"]`).waitFor();
      assert(sockets.length > before, "a new relay stream after the reload");
      // msg1 is e (32) + encrypted s (48) + the encrypted payload (+16): without the code,
      // its payload is `,"pair":"<8 chars>"` (18 bytes) shorter.
      assert(msg1.length === sockets.length && msg1.every((n) => n > 0), `binary msg1s: ${msg1}`);
      assert(msg1[0] - msg1.at(-1) === 18, `msg1 sizes ${msg1}: the reload must send no code`);
      const again = (await d.request("device_list")).devices.filter((x) => x.kind === "relay");
      assert(again.length === 1 && again[0].id === devices[0].id, `still one device: ${JSON.stringify(again)}`);
      const stored = await page.evaluate(() => JSON.parse(localStorage.getItem("jucode-relay-host") ?? "null"));
      assert(stored?.device === devices[0].id, `the accepted device id is kept: ${JSON.stringify(stored)}`);

      // The desk revokes it: the stream closes, the reconnect is refused, the page says revoked.
      await d.request("device_revoke", { device: devices[0].id });
      const banner = page.locator('[data-state="revoked"]');
      await banner.waitFor();
      assert(/revoked/i.test(await banner.innerText()), "the banner says revoked");
      await shoot(page, "relay-revoked-phone");
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
  {
    name: "a phone whose daemon is not on the relay says so and reconnects when it comes",
    async run({ browser, home, cleanup }) {
      const relay = await startRelay(home);
      cleanup.push(() => relay.stop());
      const daemon = await startDaemon(home, { relay: relay.ws });
      cleanup.push(() => daemon.stop());
      const d = await desk(daemon);
      cleanup.push(() => d.close());
      await relayOn(d);
      await d.request("session_create", { cwd: home.project("later") });
      const { link } = await d.request("pair_link");
      // The daemon leaves the relay before the phone opens the link: 4404 host offline.
      await d.request("relay_set", { enabled: false });
      const page = await newPage(browser, PHONE);
      if (process.env.JUCODE_WEB_DIR) await serveBuiltPage(page, relay.url, process.env.JUCODE_WEB_DIR);
      await page.goto(link);
      const banner = page.locator('[data-state="reconnecting"]');
      await banner.waitFor();
      assert(/not connected to the relay/.test(await banner.innerText()), `banner: ${await banner.innerText()}`);
      await shoot(page, "relay-offline-phone");
      // Back on the relay: the code kept in memory still pairs on the next try (the backoff
      // is a few seconds at most here).
      await relayOn(d);
      await page.getByRole("link", { name: /later/ }).waitFor();
      const devices = (await d.request("device_list")).devices.filter((x) => x.kind === "relay");
      assert(devices.length === 1, `relay devices: ${JSON.stringify(devices)}`);
      assert(page.problems.length === 0, page.problems.join("\n"));
    },
  },
];
