// What the page keeps to reach a daemon through the relay: the host from a pairing link
// (`#pair=<host id>.<host key>.<code>`) and this device's own X25519 key, which is its
// credential. The code is kept in memory only, for the first connection.
import { KEY_RELAY_DEVICE, KEY_RELAY_HOST, deviceName } from "../core/auth";
import { fromB64u, generateKeyPair, publicKey, toB64u, type KeyPair } from "./noise";

/** The pairing fragment, strictly: 22-char host id, 43-char key, alphanumeric code. */
export const PAIR_FRAGMENT = /^#?pair=([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})\.([A-Za-z0-9]+)$/;

export interface PairLink {
  hostId: string;
  hostStaticPub: string;
  code: string;
}

/** What `jucode-relay-host` holds. `device` is set once the daemon accepted this device. */
export interface HostRecord {
  host_id: string;
  host_static_pub: string;
  /** The relay's base WebSocket URL, `ws(s)://<origin>/relay/v1`. */
  relay: string;
  device?: string;
}

/** Everything a relay stream needs. */
export interface RelaySetup {
  host: HostRecord;
  hostKey: Uint8Array;
  device: KeyPair;
  name: string;
  /** The code to send in msg1, until a connection has been accepted. */
  code: string | null;
}

export function parsePairFragment(fragment: string): PairLink | null {
  const m = PAIR_FRAGMENT.exec(fragment);
  if (!m) return null;
  const key = fromB64u(m[2]!);
  if (!key || key.length !== 32) return null;
  return { hostId: m[1]!, hostStaticPub: m[2]!, code: m[3]! };
}

/** The relay's WebSocket base for a page served from `origin` (the relay serves this page). */
export function relayBase(origin: string): string {
  const u = new URL(origin);
  const scheme = u.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${u.host}/relay/v1`;
}

export function loadHost(storage: Storage = localStorage): HostRecord | null {
  try {
    const r = JSON.parse(storage.getItem(KEY_RELAY_HOST) ?? "null") as Partial<HostRecord> | null;
    if (
      !r ||
      typeof r.host_id !== "string" ||
      !/^[A-Za-z0-9_-]{22}$/.test(r.host_id) ||
      typeof r.host_static_pub !== "string" ||
      fromB64u(r.host_static_pub)?.length !== 32 ||
      typeof r.relay !== "string" ||
      !/^wss?:\/\//.test(r.relay)
    )
      return null;
    return {
      host_id: r.host_id,
      host_static_pub: r.host_static_pub,
      relay: r.relay,
      ...(typeof r.device === "string" ? { device: r.device } : {}),
    };
  } catch {
    return null;
  }
}

export function saveHost(r: HostRecord, storage: Storage = localStorage): void {
  storage.setItem(KEY_RELAY_HOST, JSON.stringify(r));
}

/** This device's key: made once, then always the same (it is what the daemon knows us by). */
export function deviceKey(storage: Storage = localStorage): KeyPair {
  try {
    const r = JSON.parse(storage.getItem(KEY_RELAY_DEVICE) ?? "null") as { priv?: unknown; pub?: unknown } | null;
    if (r && typeof r.priv === "string" && typeof r.pub === "string") {
      const priv = fromB64u(r.priv);
      if (priv?.length === 32) {
        const pub = publicKey(priv);
        if (toB64u(pub) === r.pub) return { priv, pub };
      }
    }
  } catch {
    // fall through: a broken record is replaced
  }
  const kp = generateKeyPair();
  storage.setItem(KEY_RELAY_DEVICE, JSON.stringify({ priv: toB64u(kp.priv), pub: toB64u(kp.pub) }));
  return kp;
}

function setup(host: HostRecord, code: string | null, storage: Storage): RelaySetup {
  return { host, hostKey: fromB64u(host.host_static_pub)!, device: deviceKey(storage), name: deviceName(), code };
}

/** A pairing link just opened here: keep its host (a new host forgets the old device id). */
export function setupFromFragment(fragment: string, origin: string, storage: Storage = localStorage): RelaySetup | null {
  const link = parsePairFragment(fragment);
  if (!link) return null;
  const host: HostRecord = { host_id: link.hostId, host_static_pub: link.hostStaticPub, relay: relayBase(origin) };
  saveHost(host, storage);
  return setup(host, link.code, storage);
}

/** A later visit: the host kept from an earlier link, no code. */
export function setupFromStorage(storage: Storage = localStorage): RelaySetup | null {
  const host = loadHost(storage);
  return host ? setup(host, null, storage) : null;
}

/** The daemon accepted this device: later connections send no code. */
export function markPaired(s: RelaySetup, device: string, storage: Storage = localStorage): void {
  s.code = null;
  if (s.host.device !== device) {
    s.host = { ...s.host, device };
    saveHost(s.host, storage);
  }
}

/** msg1's payload. */
export function helloPayload(s: RelaySetup): Uint8Array {
  const body: { name: string; pair?: string } = { name: s.name };
  if (s.code) body.pair = s.code;
  return new TextEncoder().encode(JSON.stringify(body));
}
