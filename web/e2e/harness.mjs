// The browser suite's harness: the real daemon (and relay) binaries on loopback with a
// temporary home, a desk client over WebSocket, and real headless Chromium driven by
// playwright-core. `cargo xtask browser` builds the binaries and runs `run.mjs`.
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(here, "../..");
const TARGET = process.env.CARGO_TARGET_DIR ? resolve(process.env.CARGO_TARGET_DIR) : join(ROOT, "target");
export const SHOTS = process.env.JUCODE_SCREENSHOTS ?? join(TARGET, "screenshots");

export function bin(name) {
  const env = { "jucode-daemon": "JUCODE_DAEMON_BIN", "jucode-fake-serve": "JUCODE_FAKE_SERVE_BIN", "jucode-fake-model": "JUCODE_FAKE_MODEL_BIN", "jucode-relay": "JUCODE_RELAY_BIN" }[name];
  return process.env[env] ?? join(TARGET, "debug", name);
}

const WAIT_MS = 20_000;

/** Spawns a program that prints "listening on http://ADDR" once it serves. */
function spawnListening(program, args, env, what) {
  return new Promise((resolveP, rejectP) => {
    const child = spawn(program, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    const logs = [];
    let done = false;
    const timer = setTimeout(() => {
      if (!done) {
        done = true;
        child.kill("SIGKILL");
        rejectP(new Error(`${what} did not start:\n${logs.join("")}`));
      }
    }, WAIT_MS);
    const onData = (chunk) => {
      const text = chunk.toString();
      logs.push(text);
      const m = /listening on http:\/\/([^\s/]+)/.exec(text);
      if (m && !done) {
        done = true;
        clearTimeout(timer);
        resolveP({ child, addr: m[1], logs });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        rejectP(new Error(`${what} exited (${code}) before listening:\n${logs.join("")}`));
      }
    });
  });
}

/** A temporary directory for one scenario: the user's HOME, with the jucode home inside. */
export function tempHome() {
  const root = mkdtempSync(join(tmpdir(), "jucode-e2e-"));
  const home = join(root, ".jucode");
  mkdirSync(home, { recursive: true });
  return { root, home, project: (name) => { const p = join(root, name); mkdirSync(p, { recursive: true }); return p; }, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/**
 * The real daemon with the scripted engine (jucode-fake-serve) by default.
 * options: { home (from tempHome), port (to restart on the same one), relay, args, env, web }
 */
export async function startDaemon(h, options = {}) {
  const args = ["--listen", `127.0.0.1:${options.port ?? 0}`, "--home", h.home];
  if (options.relay) args.push("--relay", options.relay);
  else args.push("--no-relay");
  const web = options.web ?? process.env.JUCODE_WEB_DIR;
  if (web) args.push("--web", web);
  args.push(...(options.args ?? []));
  const env = { ...process.env, HOME: h.root, ...(options.env ?? {}) };
  delete env.RUST_LOG;
  if (options.builtin) delete env.JUCODE_SERVE_BIN;
  else env.JUCODE_SERVE_BIN = bin("jucode-fake-serve");
  const { child, addr, logs } = await spawnListening(bin("jucode-daemon"), args, env, "the daemon");
  const daemon = {
    addr,
    port: Number(addr.split(":").pop()),
    url: `http://${addr}`,
    home: h.home,
    child,
    logs,
    token: () => readFileSync(join(h.home, "daemon", "token"), "utf8").trim(),
    /** The local link `jucode-daemon open` prints: the token in the fragment. */
    localLink: (path = "/remote") => `http://${addr}${path}#token=${daemon.token()}`,
    stop: () => stopChild(child, "SIGTERM"),
    kill: () => stopChild(child, "SIGKILL"),
  };
  return daemon;
}

function stopChild(child, signal) {
  return new Promise((r) => {
    if (child.exitCode !== null || child.signalCode !== null) return r();
    child.once("exit", () => r());
    child.kill(signal);
  });
}

/**
 * The scripted model server (`jucode-fake-model`) on loopback, for scenarios on the daemon's
 * built-in engine: `config` is the config.json that points the engine at it.
 */
export async function startFakeModel() {
  const { child, addr, logs } = await spawnListening(bin("jucode-fake-model"), [], { ...process.env }, "the fake model server");
  const config = await new Promise((resolveC, rejectC) => {
    const timer = setTimeout(() => rejectC(new Error(`the fake model server printed no config:\n${logs.join("")}`)), WAIT_MS);
    const look = () => {
      const m = /^config (\{.*\})$/m.exec(logs.join(""));
      if (m) {
        clearTimeout(timer);
        child.stdout.off("data", look);
        resolveC(JSON.parse(m[1]));
      }
    };
    // spawnListening's own listener, registered first, keeps appending to `logs`.
    child.stdout.on("data", look);
    look();
  });
  return { addr, config, stop: () => stopChild(child, "SIGTERM") };
}

/** The self-hosted relay server (`jucode-relay`) on loopback. */
export async function startRelay(h, options = {}) {
  const args = ["--listen", "127.0.0.1:0", ...(options.args ?? [])];
  const { child, addr, logs } = await spawnListening(bin("jucode-relay"), args, { ...process.env, HOME: h.root }, "the relay");
  return { addr, url: `http://${addr}`, ws: `ws://${addr}/relay/v1`, child, logs, stop: () => stopChild(child, "SIGTERM") };
}

/** A desk client: the daemon token over a WebSocket, request/reply by id, frames kept. */
export async function desk(daemon, token = daemon.token()) {
  const ws = new WebSocket(`ws://${daemon.addr}/?token=${encodeURIComponent(token)}`);
  const frames = [];
  const waiters = [];
  let nextId = 1;
  ws.onmessage = (e) => {
    const f = JSON.parse(e.data);
    frames.push(f);
    for (const w of [...waiters]) if (w.pred(f)) { waiters.splice(waiters.indexOf(w), 1); clearTimeout(w.timer); w.resolve(f); }
  };
  await new Promise((r, j) => { ws.onopen = r; ws.onerror = () => j(new Error("desk: could not connect")); });
  const client = {
    frames,
    /** The next frame (from now, or already seen when `seen` is true) matching `pred`. */
    next(pred, { seen = false, timeoutMs = WAIT_MS } = {}) {
      if (seen) { const f = frames.find(pred); if (f) return Promise.resolve(f); }
      return new Promise((resolveW, rejectW) => {
        const w = { pred, resolve: resolveW };
        w.timer = setTimeout(() => { waiters.splice(waiters.indexOf(w), 1); rejectW(new Error(`desk: no matching frame in ${timeoutMs} ms`)); }, timeoutMs);
        waiters.push(w);
      });
    },
    async request(op, fields = {}) {
      const id = nextId++;
      const reply = client.next((f) => f.id === id);
      ws.send(JSON.stringify({ ...fields, op, id }));
      const f = await reply;
      if (f.type === "error") throw new Error(`${op}: ${f.message}`);
      return f;
    },
    send(op, fields = {}) { ws.send(JSON.stringify({ ...fields, op })); },
    close() { ws.close(); },
  };
  await client.next((f) => f.type === "requirements", { seen: true });
  return client;
}

/** Headless Chromium as the machine has it (Debian's package), flags that keep it offline. */
export async function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
}

export const PHONE = { viewport: { width: 360, height: 740 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };
export const DESKTOP = { viewport: { width: 1280, height: 800 } };

/** A new page whose console errors and CSP violations fail the scenario at the end. */
export async function newPage(browser, device = DESKTOP) {
  const context = await browser.newContext(device);
  const page = await context.newPage();
  page.problems = [];
  // A Content-Security-Policy violation on an element of the page is a finding. Chromium also
  // reports (and blocks) an inline handler it merely parses in an inert document, as any
  // in-browser sanitiser does with hostile markup (`<svg onload>` through DOMParser): those
  // reach no element of the page, so they are kept apart in `page.inertCsp`.
  page.inertCsp = [];
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      const connected = e.target && e.target.nodeType === 1 && e.target.isConnected;
      const where = connected ? e.target.outerHTML.slice(0, 160) : "a detached or inert node";
      console.error(`CSP violation${connected ? "" : " (inert)"}: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${where}`);
    });
  });
  page.on("pageerror", (e) => page.problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    const text = m.text();
    if (text.startsWith("CSP violation (inert)")) page.inertCsp.push(text);
    // Chromium's own echo of a violation; the listener above has already said what it was.
    else if (/violates the following Content Security Policy/.test(text)) return;
    else if (!/WebSocket connection|Failed to load resource/.test(text)) page.problems.push(`console error: ${text}`);
  });
  page.on("dialog", (d) => { page.problems.push(`a dialog opened: ${d.message()}`); void d.dismiss(); });
  return page;
}

export async function shoot(page, name) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

export function assert(cond, message) {
  if (!cond) throw new Error(`assertion failed: ${message}`);
}

export async function eventually(fn, what, timeoutMs = WAIT_MS) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try { const v = await fn(); if (v) return v; } catch (e) { last = e; }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

/**
 * What a keyboard or screen-reader user needs from the current view: every control has an
 * accessible name, every image an alt, ids are unique, and nothing is wider than the viewport
 * (a phone at 360 px must not scroll sideways). Returns the problems found.
 */
export async function auditView(page) {
  return page.evaluate(() => {
    const problems = [];
    const named = (el) => {
      const aria = el.getAttribute("aria-label") || el.getAttribute("aria-labelledby") || el.getAttribute("title");
      if (aria && aria.trim()) return true;
      if (el.id && document.querySelector(`label[for="${CSS.escape(el.id)}"]`)) return true;
      if (el.closest("label")) return true;
      if (["BUTTON", "A", "SUMMARY"].includes(el.tagName) && el.textContent.trim()) return true;
      if (el.tagName === "INPUT" && ["submit", "button"].includes(el.type) && el.value) return true;
      return false;
    };
    const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
    for (const el of document.querySelectorAll("button, input:not([type=hidden]), select, textarea, a[href], summary, [role=button]")) {
      if (visible(el) && !named(el)) problems.push(`unnamed control: ${el.outerHTML.slice(0, 120)}`);
    }
    for (const img of document.querySelectorAll("img")) {
      if (!img.hasAttribute("alt")) problems.push(`image without alt: ${img.outerHTML.slice(0, 120)}`);
    }
    const ids = new Map();
    for (const el of document.querySelectorAll("[id]")) ids.set(el.id, (ids.get(el.id) ?? 0) + 1);
    for (const [id, n] of ids) if (n > 1) problems.push(`id "${id}" used ${n} times`);
    const doc = document.documentElement;
    if (doc.scrollWidth > doc.clientWidth + 1) problems.push(`the page is ${doc.scrollWidth}px wide in a ${doc.clientWidth}px viewport`);
    return problems;
  });
}
