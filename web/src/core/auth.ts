// How this page reaches its daemon, decided once at start from the address and localStorage.
// Tokens live only in localStorage and leave it only in the WebSocket connect; the address
// bar is cleaned at once so a token or code never stays in history.

export const KEY_LOCAL_TOKEN = "jucode-daemon-token";
export const KEY_DEVICE_TOKEN = "jucode-device-token";
export const KEY_RELAY_HOST = "jucode-relay-host";
/** This device's X25519 key for the relay, `{priv, pub}` in base64url. */
export const KEY_RELAY_DEVICE = "jucode-relay-device";

export type Access =
  | { kind: "local"; token: string }
  | { kind: "device"; token: string }
  | { kind: "relay" }
  | { kind: "pair"; code: string }
  | { kind: "relay-pair"; fragment: string }
  | { kind: "none" };

function clean(url: URL): void {
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
}

/** Reads and forgets what the address carries; falls back to what was kept. */
export function decideAccess(loc: Location = location): Access {
  const url = new URL(loc.href);
  const fragment = new URLSearchParams(url.hash.replace(/^#/, ""));
  const local = fragment.get("token");
  if (local) {
    localStorage.setItem(KEY_LOCAL_TOKEN, local);
    url.hash = "";
    clean(url);
    return { kind: "local", token: local };
  }
  if (fragment.get("pair")) {
    const raw = url.hash;
    url.hash = "";
    clean(url);
    return { kind: "relay-pair", fragment: raw };
  }
  const code = url.searchParams.get("pair");
  if (code) {
    url.searchParams.delete("pair");
    clean(url);
    return { kind: "pair", code };
  }
  const kept = localStorage.getItem(KEY_LOCAL_TOKEN);
  if (kept) return { kind: "local", token: kept };
  const device = localStorage.getItem(KEY_DEVICE_TOKEN);
  if (device) return { kind: "device", token: device };
  if (localStorage.getItem(KEY_RELAY_HOST)) return { kind: "relay" };
  return { kind: "none" };
}

/** A name for this device, shown in the desktop's device list. */
export function deviceName(): string {
  const ua = navigator.userAgent;
  const what = /iPhone|iPad/.test(ua)
    ? "iPhone"
    : /Android/.test(ua)
      ? "Android"
      : /Mac OS X/.test(ua)
        ? "Mac"
        : /Windows/.test(ua)
          ? "Windows"
          : /Linux/.test(ua)
            ? "Linux"
            : "device";
  return `Browser on ${what}`;
}

/** A pairing attempt `POST /api/pair` turned down: `status` 403 is a wrong, expired or used
 * code, 429 too many wrong codes in the last minute, 0 no answer at all. */
export class PairError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** What a person is told about a failed pairing. */
export function pairErrorText(e: unknown): string {
  const status = e instanceof PairError ? e.status : -1;
  if (status === 403) return "That code is wrong or has expired. Codes last 5 minutes and work once: make a new one on the computer.";
  if (status === 429) return "Too many wrong codes. Wait a minute, then try again.";
  if (status === 0) return "The computer did not answer. Check that this page was opened from its address.";
  return `Pairing failed: ${(e as Error)?.message ?? String(e)}`;
}

/** Trades a pairing code for a device token at `POST /api/pair`. */
export async function pairWithCode(code: string): Promise<string> {
  let r: Response;
  try {
    r = await fetch("/api/pair", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ code: code.trim().toUpperCase(), name: deviceName() }),
    });
  } catch {
    throw new PairError("no answer", 0);
  }
  const body = (await r.json().catch(() => ({}))) as { token?: string; error?: string };
  if (!r.ok || !body.token) throw new PairError(body.error ?? `pairing failed (${r.status})`, r.status);
  localStorage.setItem(KEY_DEVICE_TOKEN, body.token);
  return body.token;
}

/** Forgets every credential this page kept (after a revoke, or when the user asks). */
export function forgetAll(): void {
  for (const k of [KEY_LOCAL_TOKEN, KEY_DEVICE_TOKEN, KEY_RELAY_HOST, KEY_RELAY_DEVICE]) localStorage.removeItem(k);
}
