// The relay transport and pairing against a scripted relay socket with a Noise responder in
// the role of the daemon: what msg1 carries, what each close means, and that a broken stream
// ends instead of delivering anything.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Channel, CHUNK, HandshakeState, PROLOGUE, generateKeyPair, toB64u, type KeyPair } from "../src/relay/noise";
import {
  deviceKey,
  helloPayload,
  loadHost,
  parsePairFragment,
  relayBase,
  setupFromFragment,
  setupFromStorage,
} from "../src/relay/pairing";
import { closeKind, connectUrl, relayOpener } from "../src/relay/socket";
import type { CloseInfo, Transport } from "../src/core/transport";

class MemoryStorage implements Storage {
  private m = new Map<string, string>();
  get length() {
    return this.m.size;
  }
  clear() {
    this.m.clear();
  }
  getItem(k: string) {
    return this.m.get(k) ?? null;
  }
  key(i: number) {
    return [...this.m.keys()][i] ?? null;
  }
  removeItem(k: string) {
    this.m.delete(k);
  }
  setItem(k: string, v: string) {
    this.m.set(k, String(v));
  }
}

if (!("navigator" in globalThis)) Object.defineProperty(globalThis, "navigator", { value: { userAgent: "Mozilla/5.0 (Linux; Android 14)" } });

/** A WebSocket as the relay gives the page, driven by the test. */
class FakeSocket {
  binaryType = "blob";
  readyState = 0;
  sent: Uint8Array[] = [];
  closedWith: number | null = null;
  onopen: (() => void) | null = null;
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  constructor(readonly url: string) {}
  send(b: Uint8Array) {
    this.sent.push(b.slice());
  }
  close(code = 1000) {
    if (this.readyState === 3) return;
    this.closedWith = code;
    this.readyState = 3;
    // The browser reports our own close asynchronously too.
    setTimeout(() => this.onclose?.({ code, reason: "" }), 0);
  }
  // The relay's side.
  open() {
    this.readyState = 1;
    this.onopen?.();
  }
  deliver(b: Uint8Array | string) {
    this.onmessage?.({ data: typeof b === "string" ? b : b.slice().buffer });
  }
  remoteClose(code: number, reason = "") {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder();
const tick = () => new Promise((r) => setTimeout(r, 0));

/** The daemon's end of one stream. */
function daemonSide(host: KeyPair) {
  const hs = new HandshakeState({ initiator: false, prologue: PROLOGUE, s: host });
  let ch: Channel | null = null;
  return {
    readMsg1: (m: Uint8Array) => JSON.parse(dec.decode(hs.readMessage(m))) as { name: string; pair?: string },
    remote: () => hs.remoteStatic(),
    msg2: (reply: object) => {
      const m = hs.writeMessage(enc.encode(JSON.stringify(reply)));
      if ((reply as { ok?: boolean }).ok) ch = Channel.from(hs.split());
      return m;
    },
    seal: (text: string) => ch!.seal(enc.encode(text)),
    open: (m: Uint8Array) => ch!.open(m),
  };
}

function fixture(withCode = true) {
  const storage = new MemoryStorage();
  const host = generateKeyPair();
  const hostId = "Q2xhdWRlSG9zdElkMDAwMA";
  const fragment = `#pair=${hostId}.${toB64u(host.pub)}.${withCode ? "K7QW2MZP" : "X"}`;
  const setup = setupFromFragment(fragment, "http://127.0.0.1:4000", storage)!;
  if (!withCode) setup.code = null;
  const sockets: FakeSocket[] = [];
  const opener = relayOpener(setup, {
    storage,
    handshakeTimeoutMs: 200,
    socket: (url) => {
      const s = new FakeSocket(url);
      sockets.push(s);
      return s as unknown as WebSocket;
    },
  });
  return { storage, host, hostId, setup, sockets, opener };
}

function events() {
  const messages: string[] = [];
  const closes: CloseInfo[] = [];
  return { messages, closes, ev: { message: (t: string) => messages.push(t), close: (c: CloseInfo) => closes.push(c) } };
}

/** Opens a stream through the handshake; returns the transport and the daemon's end. */
async function established(f: ReturnType<typeof fixture>, reply: object = { ok: true, device: "dev-1", name: "phone" }) {
  const e = events();
  const p = f.opener(e.ev);
  const sock = f.sockets.at(-1)!;
  sock.open();
  const d = daemonSide(f.host);
  const hello = d.readMsg1(sock.sent[0]!);
  sock.deliver(d.msg2(reply));
  return { p, sock, d, hello, e };
}

test("the pairing fragment is parsed strictly", () => {
  const key = toB64u(generateKeyPair().pub);
  const id = "Q2xhdWRlSG9zdElkMDAwMA";
  assert.deepEqual(parsePairFragment(`#pair=${id}.${key}.K7QW2MZP`), { hostId: id, hostStaticPub: key, code: "K7QW2MZP" });
  assert.ok(parsePairFragment(`pair=${id}.${key}.K7QW2MZP`), "the # is optional");
  for (const bad of [
    `#pair=${id}.${key}.`,
    `#pair=${id}x.${key}.K7QW2MZP`,
    `#pair=${id}.${key}x.K7QW2MZP`,
    `#pair=${id}.${key}.K7QW-2MZP`,
    `#pair=${id}.${key}.K7QW2MZP&x=1`,
    `#token=a&pair=${id}.${key}.K7QW2MZP`,
    `#pair=${id}.${key.slice(0, 42)}!.K7QW2MZP`,
  ])
    assert.equal(parsePairFragment(bad), null, bad);
  // 43 characters that do not spell 32 bytes canonically (stray low bits in the last one).
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const stray = key.slice(0, 42) + alphabet[alphabet.indexOf(key[42]!) | 1];
  assert.equal(parsePairFragment(`#pair=${id}.${stray}.K7QW2MZP`), null);
});

test("the relay URL comes from the page's origin", () => {
  assert.equal(relayBase("https://app.jucode.net"), "wss://app.jucode.net/relay/v1");
  assert.equal(relayBase("http://127.0.0.1:4000"), "ws://127.0.0.1:4000/relay/v1");
  const f = fixture();
  assert.equal(connectUrl(f.setup), `ws://127.0.0.1:4000/relay/v1/connect?host=${f.hostId}`);
});

test("the host record and the device key are kept, the key made once", () => {
  const f = fixture();
  assert.deepEqual(loadHost(f.storage), { host_id: f.hostId, host_static_pub: toB64u(f.host.pub), relay: "ws://127.0.0.1:4000/relay/v1" });
  const kept = JSON.parse(f.storage.getItem("jucode-relay-device")!);
  assert.equal(kept.pub, toB64u(f.setup.device.pub));
  assert.equal(kept.priv, toB64u(f.setup.device.priv));
  assert.deepEqual(deviceKey(f.storage), f.setup.device, "the same key every time");
  const later = setupFromStorage(f.storage)!;
  assert.equal(later.code, null, "a later visit sends no code");
  assert.deepEqual(later.device, f.setup.device);
  // A broken record is replaced, not trusted.
  f.storage.setItem("jucode-relay-device", JSON.stringify({ priv: kept.priv, pub: toB64u(generateKeyPair().pub) }));
  assert.notDeepEqual(deviceKey(f.storage).pub, f.setup.device.pub);
  f.storage.setItem("jucode-relay-host", '{"host_id":"short","host_static_pub":"x","relay":"ws://h"}');
  assert.equal(setupFromStorage(f.storage), null);
});

test("first connection: msg1 carries the name and the code; the daemon learns our key", async () => {
  const f = fixture();
  const { p, sock, d, hello } = await established(f);
  await p;
  assert.equal(sock.url, `ws://127.0.0.1:4000/relay/v1/connect?host=${f.hostId}`);
  assert.equal(sock.binaryType, "arraybuffer");
  assert.deepEqual(hello, { name: "Browser on Android", pair: "K7QW2MZP" });
  assert.deepEqual(d.remote(), f.setup.device.pub);
  assert.equal(loadHost(f.storage)!.device, "dev-1", "the accepted device id is kept");
  // The next connection sends no code.
  const second = await established(f);
  await second.p;
  assert.deepEqual(second.hello, { name: "Browser on Android" });
  assert.deepEqual(JSON.parse(dec.decode(helloPayload(f.setup))), { name: "Browser on Android" });
});

test("frames go both ways as chunked Noise messages", async () => {
  const f = fixture();
  const { p, sock, d, e } = await established(f);
  const t: Transport = await p;
  const big = JSON.stringify({ type: "term_output", data: "x".repeat(2 * CHUNK) });
  for (const m of d.seal('{"type":"hello","protocol":2}')) sock.deliver(m);
  const parts = d.seal(big);
  assert.equal(parts.length, 3);
  for (const m of parts) sock.deliver(m);
  assert.deepEqual(e.messages, ['{"type":"hello","protocol":2}', big]);
  const before = sock.sent.length;
  t.send(big);
  const out = sock.sent.slice(before);
  assert.equal(out.length, 3);
  let frame: Uint8Array | null = null;
  for (const m of out) frame = d.open(m);
  assert.equal(dec.decode(frame!), big);
  // Our own close reports nothing.
  t.close();
  await tick();
  assert.deepEqual(e.closes, []);
});

test("a tampered message closes the stream and delivers nothing", async () => {
  const f = fixture();
  const { p, sock, d, e } = await established(f);
  await p;
  const [m] = d.seal('{"type":"hello"}');
  m![3]! ^= 1;
  sock.deliver(m!);
  assert.deepEqual(e.messages, []);
  assert.equal(sock.closedWith, 1000);
  assert.equal(e.closes.length, 1);
  assert.equal(e.closes[0]!.kind, "dropped");
  assert.match(e.closes[0]!.reason, /decrypt/);
  // Anything after it is ignored.
  for (const x of d.seal('{"type":"late"}')) sock.deliver(x);
  await tick();
  assert.deepEqual(e.messages, []);
  assert.equal(e.closes.length, 1);
});

test("a reordered message closes the stream", async () => {
  const f = fixture();
  const { p, sock, d, e } = await established(f);
  await p;
  const [a] = d.seal('{"type":"a"}');
  const [b] = d.seal('{"type":"b"}');
  sock.deliver(b!);
  sock.deliver(a!);
  assert.deepEqual(e.messages, []);
  assert.equal(e.closes[0]?.kind, "dropped");
});

test("a half frame at close is discarded", async () => {
  const f = fixture();
  const { p, sock, d, e } = await established(f);
  await p;
  const parts = d.seal("y".repeat(CHUNK + 3));
  sock.deliver(parts[0]!);
  sock.remoteClose(4410, "host closed");
  assert.deepEqual(e.messages, []);
  assert.deepEqual(e.closes, [{ kind: "dropped", code: 4410, reason: "the daemon closed the relay stream" }]);
});

test("close codes map to what the page shows", async () => {
  assert.equal(closeKind(4404), "offline");
  assert.equal(closeKind(4410), "dropped");
  assert.equal(closeKind(4429), "busy");
  assert.equal(closeKind(4401), "revoked");
  assert.equal(closeKind(4400), "protocol");
  assert.equal(closeKind(1006), "dropped");
  // Before the handshake, the opener rejects with the same kinds.
  for (const [code, kind] of [
    [4404, "offline"],
    [4429, "busy"],
    [4410, "dropped"],
  ] as const) {
    const f = fixture();
    const p = f.opener(events().ev);
    f.sockets[0]!.remoteClose(code, "x");
    await assert.rejects(p, (e: CloseInfo) => e.kind === kind && e.code === code);
  }
});

test("a refused handshake: wrong code is refused, a known device no longer known is revoked", async () => {
  const f = fixture();
  const first = await established(f, { ok: false, error: "wrong or expired pairing code" });
  await assert.rejects(first.p, (e: CloseInfo) => e.kind === "refused" && e.reason === "wrong or expired pairing code");
  assert.equal(loadHost(f.storage)!.device, undefined);
  // Paired once, then the daemon forgets the key (device_revoke): revoked.
  const ok = await established(f);
  await ok.p;
  const again = await established(f, { ok: false, error: "this device is not paired: open a new pairing link" });
  await assert.rejects(again.p, (e: CloseInfo) => e.kind === "revoked" && /not paired/.test(e.reason));
  // A page that never got in and has no code: refused, not revoked.
  const g = fixture(false);
  const never = await established(g, { ok: false, error: "this device is not paired: open a new pairing link" });
  await assert.rejects(never.p, (e: CloseInfo) => e.kind === "refused");
});

test("a msg2 that does not decrypt (another daemon's key) is a protocol failure", async () => {
  const f = fixture();
  const e = events();
  const p = f.opener(e.ev);
  const sock = f.sockets[0]!;
  sock.open();
  const impostor = daemonSide(generateKeyPair());
  assert.throws(() => impostor.readMsg1(sock.sent[0]!));
  sock.deliver(new Uint8Array(48 + 16));
  await assert.rejects(p, (x: CloseInfo) => x.kind === "protocol");
  assert.equal(sock.closedWith, 1000);
});

test("no msg2 in time: the handshake times out", async () => {
  const f = fixture();
  const p = f.opener(events().ev);
  f.sockets[0]!.open();
  await assert.rejects(p, (x: CloseInfo) => x.kind === "dropped" && /timed out/.test(x.reason));
  assert.equal(f.sockets[0]!.closedWith, 1000);
});

test("a text message from the relay ends the stream", async () => {
  const f = fixture();
  const { p, sock, e } = await established(f);
  await p;
  sock.deliver("hello");
  assert.equal(e.closes[0]?.kind, "protocol");
});
