// Web Push for a paired page: the VAPID key from the relay that served this page, the
// browser's subscription, and the daemon's push_subscribe / push_unsubscribe / push_test.
import { request } from "../core/daemon";

export const KEY_PUSH_ON = "jucode-push-on";
const SUBSCRIBE_TIMEOUT_MS = 10_000;

/** Why notifications cannot be turned on here, or null when they can be tried. */
export function pushUnsupported(): string | null {
  if (typeof navigator === "undefined" || !("serviceWorker" in navigator)) return "This browser has no service workers, so it cannot receive notifications.";
  if (typeof PushManager === "undefined") return "This browser cannot receive Web Push notifications.";
  if (typeof Notification === "undefined") return "This browser cannot show notifications.";
  return null;
}

/** The relay's VAPID public key (base64url), or null when this page's origin has none: the
 * daemon answers that path with the page itself, a relay without push with 501. */
export async function fetchPushKey(): Promise<string | null> {
  try {
    const r = await fetch("/relay/v1/push/key", { cache: "no-store", headers: { accept: "application/json" } });
    if (!r.ok || !/json/.test(r.headers.get("content-type") ?? "")) return null;
    const body = (await r.json()) as { key?: unknown };
    return typeof body.key === "string" && /^[A-Za-z0-9_-]{20,}={0,2}$/.test(body.key) ? body.key : null;
  } catch {
    return null;
  }
}

/** base64url (with or without padding) to bytes. */
export function base64UrlBytes(s: string): Uint8Array<ArrayBuffer> {
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export async function registration(): Promise<ServiceWorkerRegistration | undefined> {
  return navigator.serviceWorker.getRegistration("/remote/");
}

/** The browser's current subscription for this page, if any. */
export async function currentSubscription(): Promise<PushSubscription | null> {
  const reg = await registration();
  return (await reg?.pushManager.getSubscription()) ?? null;
}

export class PushProblem extends Error {}

/** Waits until `reg` has an active worker. Not `serviceWorker.ready`: a page that was loaded
 * at `/remote` itself lies outside the scope `/remote/` (only `/remote/…` is inside), and
 * `ready` never settles for it, while subscribing through the registration works. */
function activeWorker(reg: ServiceWorkerRegistration): Promise<void> {
  if (reg.active) return Promise.resolve();
  const w = reg.installing ?? reg.waiting;
  if (!w) return Promise.reject(new PushProblem("The service worker is not installed; reload the page and try again."));
  return new Promise((resolve, reject) => {
    w.addEventListener("statechange", () => {
      if (w.state === "activated") resolve();
      else if (w.state === "redundant") reject(new PushProblem("The service worker failed to start; reload the page and try again."));
    });
  });
}

/** Asks permission, subscribes with the relay's key and tells the daemon. */
export async function enablePush(): Promise<void> {
  const unsupported = pushUnsupported();
  if (unsupported) throw new PushProblem(unsupported);
  const key = await fetchPushKey();
  if (!key)
    throw new PushProblem(
      "Notifications need the relay: open this page through a relay pairing link (its address serves the push key). This address has none.",
    );
  const permission = await Notification.requestPermission();
  if (permission !== "granted")
    throw new PushProblem(
      permission === "denied" ? "Notifications are blocked for this site in the browser's settings." : "Notifications were not allowed.",
    );
  const reg = (await registration()) ?? (await navigator.serviceWorker.register("/remote/sw.js", { scope: "/remote/" }));
  await activeWorker(reg);
  let sub = await reg.pushManager.getSubscription();
  if (!sub) {
    // A browser whose push service cannot be reached may never settle: give up after a while.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new PushProblem(`The browser's push service did not answer in ${SUBSCRIBE_TIMEOUT_MS / 1000} s. Try again later.`)), SUBSCRIBE_TIMEOUT_MS);
    });
    try {
      sub = await Promise.race([reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: base64UrlBytes(key) }), late]);
    } catch (e) {
      if (e instanceof PushProblem) throw e;
      throw new PushProblem(`The browser's push service refused: ${(e as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }
  await request("push_subscribe", { subscription: sub.toJSON() });
  localStorage.setItem(KEY_PUSH_ON, "1");
}

export async function disablePush(): Promise<void> {
  localStorage.removeItem(KEY_PUSH_ON);
  const sub = await currentSubscription().catch(() => null);
  if (!sub) return;
  await request("push_unsubscribe", { endpoint: sub.endpoint });
  await sub.unsubscribe().catch(() => false);
}

export interface PushResult {
  service: string;
  status?: number;
  error?: string;
}

export async function testPush(): Promise<PushResult[]> {
  const reply = await request("push_test");
  return Array.isArray(reply.results) ? (reply.results as PushResult[]) : [];
}

/** One result as a person reads it. */
export function describeResult(r: PushResult): { ok: boolean; text: string } {
  const service = String(r.service ?? "push service");
  if (typeof r.error === "string") return { ok: false, text: `${service}: ${r.error}` };
  const status = Number(r.status);
  if (status >= 200 && status < 300) return { ok: true, text: `${service}: sent (${status})` };
  if (status === 410) return { ok: false, text: `${service}: the subscription is gone (410); enable notifications again` };
  if (status === 429) return { ok: false, text: `${service}: too many notifications (429); wait a little` };
  if (status === 501) return { ok: false, text: `${service}: the relay has no push configured (501)` };
  return { ok: false, text: `${service}: failed (${Number.isFinite(status) ? status : "no status"})` };
}
