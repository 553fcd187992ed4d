// The Noise layer of a relay stream: Noise_IK_25519_ChaChaPoly_SHA256 as the Noise Protocol
// Framework (revision 34) defines it, on the audited @noble primitives, and the flag-byte
// chunking that carries one daemon frame in one or more transport messages.
//
// The page is the initiator (it knows the daemon's static key from the pairing link). The
// responder role exists too, so tests can run both ends and check against the published vector.
import { x25519 } from "@noble/curves/ed25519.js";
import { chacha20poly1305 } from "@noble/ciphers/chacha.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { hmac } from "@noble/hashes/hmac.js";

export const PROTOCOL_NAME = "Noise_IK_25519_ChaChaPoly_SHA256";
/** Mixed in by both sides: 15 ASCII bytes, no length, no terminator. */
export const PROLOGUE = new TextEncoder().encode("jucode-relay-v1");
/** Plaintext bytes per chunk: + 1 flag byte + 16 tag bytes stays under 65535. */
export const CHUNK = 65000;
export const MAX_NOISE_MESSAGE = 65535;
/** The largest frame put back together from chunks. */
export const MAX_FRAME = 16 * 1024 * 1024;

const DHLEN = 32;
const HASHLEN = 32;
const TAGLEN = 16;
const EMPTY = new Uint8Array(0);
// The counter stays a safe integer; 2^53 messages never happen on one stream, and reaching the
// bound fails closed instead of reusing a nonce.
const MAX_NONCE = Number.MAX_SAFE_INTEGER;

/** Any failure of the Noise layer. The stream it happened on must end. */
export class NoiseError extends Error {}

export interface KeyPair {
  priv: Uint8Array;
  pub: Uint8Array;
}

export function generateKeyPair(): KeyPair {
  const priv = x25519.utils.randomSecretKey();
  return { priv, pub: x25519.getPublicKey(priv) };
}

export function publicKey(priv: Uint8Array): Uint8Array {
  return x25519.getPublicKey(priv);
}

function concat(...parts: Uint8Array[]): Uint8Array {
  let len = 0;
  for (const p of parts) len += p.length;
  const out = new Uint8Array(len);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function isZero(b: Uint8Array): boolean {
  let acc = 0;
  for (const x of b) acc |= x;
  return acc === 0;
}

/** DH(priv, pub); refuses an all-zero result (an all-zero or low-order public key). */
export function dh(priv: Uint8Array, pub: Uint8Array): Uint8Array {
  if (pub.length !== DHLEN) throw new NoiseError("a public key must be 32 bytes");
  let shared: Uint8Array;
  try {
    shared = x25519.getSharedSecret(priv, pub);
  } catch {
    throw new NoiseError("an all-zero or low-order public key");
  }
  if (isZero(shared)) throw new NoiseError("an all-zero or low-order public key");
  return shared;
}

/** HKDF as Noise uses it: two or three 32-byte outputs from a chaining key and input. */
function hkdf(ck: Uint8Array, ikm: Uint8Array, outputs: 2 | 3): Uint8Array[] {
  const temp = hmac(sha256, ck, ikm);
  const o1 = hmac(sha256, temp, Uint8Array.of(1));
  const o2 = hmac(sha256, temp, concat(o1, Uint8Array.of(2)));
  if (outputs === 2) return [o1, o2];
  return [o1, o2, hmac(sha256, temp, concat(o2, Uint8Array.of(3)))];
}

/** 32 zero bits, then the 64-bit counter little-endian. */
function nonceBytes(n: number): Uint8Array {
  const out = new Uint8Array(12);
  const view = new DataView(out.buffer);
  view.setUint32(4, n >>> 0, true);
  view.setUint32(8, Math.floor(n / 2 ** 32), true);
  return out;
}

export class CipherState {
  private k: Uint8Array | null = null;
  private n = 0;

  initializeKey(k: Uint8Array | null): void {
    this.k = k;
    this.n = 0;
  }

  hasKey(): boolean {
    return this.k !== null;
  }

  encryptWithAd(ad: Uint8Array, plaintext: Uint8Array): Uint8Array {
    if (!this.k) return plaintext;
    if (this.n >= MAX_NONCE) throw new NoiseError("nonce exhausted");
    const out = chacha20poly1305(this.k, nonceBytes(this.n), ad).encrypt(plaintext);
    this.n += 1;
    return out;
  }

  /** A failed decryption leaves the nonce where it was (the Noise spec's rule). */
  decryptWithAd(ad: Uint8Array, ciphertext: Uint8Array): Uint8Array {
    if (!this.k) return ciphertext;
    if (this.n >= MAX_NONCE) throw new NoiseError("nonce exhausted");
    if (ciphertext.length < TAGLEN) throw new NoiseError("a message shorter than its tag");
    let out: Uint8Array;
    try {
      out = chacha20poly1305(this.k, nonceBytes(this.n), ad).decrypt(ciphertext);
    } catch {
      throw new NoiseError("a message did not decrypt");
    }
    this.n += 1;
    return out;
  }
}

class SymmetricState {
  private ck: Uint8Array;
  h: Uint8Array;
  readonly cs = new CipherState();

  constructor(protocolName: string) {
    const name = new TextEncoder().encode(protocolName);
    if (name.length <= HASHLEN) {
      this.h = new Uint8Array(HASHLEN);
      this.h.set(name);
    } else {
      this.h = sha256(name);
    }
    this.ck = this.h;
  }

  mixKey(ikm: Uint8Array): void {
    const [ck, k] = hkdf(this.ck, ikm, 2);
    this.ck = ck!;
    this.cs.initializeKey(k!);
  }

  mixHash(data: Uint8Array): void {
    this.h = sha256(concat(this.h, data));
  }

  encryptAndHash(plaintext: Uint8Array): Uint8Array {
    const c = this.cs.encryptWithAd(this.h, plaintext);
    this.mixHash(c);
    return c;
  }

  decryptAndHash(ciphertext: Uint8Array): Uint8Array {
    const p = this.cs.decryptWithAd(this.h, ciphertext);
    this.mixHash(ciphertext);
    return p;
  }

  split(): [CipherState, CipherState] {
    const [k1, k2] = hkdf(this.ck, EMPTY, 2);
    const c1 = new CipherState();
    const c2 = new CipherState();
    c1.initializeKey(k1!);
    c2.initializeKey(k2!);
    return [c1, c2];
  }
}

export interface HandshakeOptions {
  initiator: boolean;
  prologue: Uint8Array;
  s: KeyPair;
  /** The responder's static key: required for the initiator (IK's pre-message). */
  rs?: Uint8Array;
  /** Tests only: a fixed ephemeral key, to reproduce published vectors. */
  e?: KeyPair;
  protocolName?: string;
}

/** The two ciphers after the handshake, and the handshake hash (a channel binding). */
export interface Established {
  send: CipherState;
  recv: CipherState;
  hash: Uint8Array;
}

type Token = "e" | "s" | "ee" | "es" | "se" | "ss";
// IK:  <- s  ...  -> e, es, s, ss   <- e, ee, se
const IK: Token[][] = [
  ["e", "es", "s", "ss"],
  ["e", "ee", "se"],
];

/** One IK handshake: a fresh one for every stream. */
export class HandshakeState {
  private readonly ss: SymmetricState;
  private readonly initiator: boolean;
  private readonly s: KeyPair;
  private e: KeyPair | null = null;
  private readonly fixedE: KeyPair | undefined;
  private rs: Uint8Array | null;
  private re: Uint8Array | null = null;
  private step = 0;
  private failed = false;

  constructor(o: HandshakeOptions) {
    this.ss = new SymmetricState(o.protocolName ?? PROTOCOL_NAME);
    this.initiator = o.initiator;
    this.s = o.s;
    this.fixedE = o.e;
    this.rs = o.rs ?? null;
    this.ss.mixHash(o.prologue);
    if (this.initiator) {
      if (!this.rs || this.rs.length !== DHLEN) throw new NoiseError("IK needs the responder's static key");
      this.ss.mixHash(this.rs);
    } else {
      this.ss.mixHash(this.s.pub);
    }
  }

  /** The peer's static key, once known (the responder learns it from message 1). */
  remoteStatic(): Uint8Array | null {
    return this.rs;
  }

  get finished(): boolean {
    return this.step >= IK.length;
  }

  private myTurn(): boolean {
    return (this.step % 2 === 0) === this.initiator;
  }

  private dhToken(t: "ee" | "es" | "se" | "ss"): void {
    // es: initiator's e with responder's s; se: initiator's s with responder's e.
    const mine = (x: "e" | "s") => (x === "e" ? this.e : this.s);
    const theirs = (x: "e" | "s") => (x === "e" ? this.re : this.rs);
    const [a, b] = [t[0] as "e" | "s", t[1] as "e" | "s"];
    const [localKind, remoteKind] = this.initiator ? [a, b] : [b, a];
    const local = mine(localKind);
    const remote = theirs(remoteKind);
    if (!local || !remote) throw new NoiseError(`missing a key for ${t}`);
    this.ss.mixKey(dh(local.priv, remote));
  }

  writeMessage(payload: Uint8Array): Uint8Array {
    this.check(true);
    try {
      const parts: Uint8Array[] = [];
      for (const t of IK[this.step]!) {
        if (t === "e") {
          this.e = this.fixedE ?? generateKeyPair();
          parts.push(this.e.pub);
          this.ss.mixHash(this.e.pub);
        } else if (t === "s") {
          parts.push(this.ss.encryptAndHash(this.s.pub));
        } else {
          this.dhToken(t);
        }
      }
      parts.push(this.ss.encryptAndHash(payload));
      const msg = concat(...parts);
      if (msg.length > MAX_NOISE_MESSAGE) throw new NoiseError("a handshake message over 65535 bytes");
      this.step += 1;
      return msg;
    } catch (e) {
      this.failed = true;
      throw e instanceof NoiseError ? e : new NoiseError(String(e));
    }
  }

  readMessage(message: Uint8Array): Uint8Array {
    this.check(false);
    try {
      if (message.length > MAX_NOISE_MESSAGE) throw new NoiseError("a handshake message over 65535 bytes");
      let at = 0;
      const take = (n: number) => {
        if (at + n > message.length) throw new NoiseError("a handshake message too short");
        const part = message.subarray(at, at + n);
        at += n;
        return part;
      };
      for (const t of IK[this.step]!) {
        if (t === "e") {
          this.re = take(DHLEN).slice();
          this.ss.mixHash(this.re);
        } else if (t === "s") {
          const len = this.ss.cs.hasKey() ? DHLEN + TAGLEN : DHLEN;
          this.rs = this.ss.decryptAndHash(take(len));
        } else {
          this.dhToken(t);
        }
      }
      const payload = this.ss.decryptAndHash(message.subarray(at));
      this.step += 1;
      return payload;
    } catch (e) {
      this.failed = true;
      throw e instanceof NoiseError ? e : new NoiseError(String(e));
    }
  }

  /** After the last message: the transport ciphers (initiator sends with the first). */
  split(): Established {
    if (!this.finished || this.failed) throw new NoiseError("the handshake is not finished");
    const [c1, c2] = this.ss.split();
    return this.initiator
      ? { send: c1, recv: c2, hash: this.ss.h }
      : { send: c2, recv: c1, hash: this.ss.h };
  }

  private check(writing: boolean): void {
    if (this.failed) throw new NoiseError("the handshake already failed");
    if (this.finished) throw new NoiseError("the handshake is over");
    if (this.myTurn() !== writing) throw new NoiseError(writing ? "not our turn to write" : "not our turn to read");
  }
}

/** The page's side of a relay stream. */
export function initiator(s: KeyPair, hostStatic: Uint8Array): HandshakeState {
  return new HandshakeState({ initiator: true, prologue: PROLOGUE, s, rs: hostStatic });
}

/**
 * An established stream: frames in, Noise messages out, and back. Any error from `open` means
 * the stream must close; the channel refuses everything after it.
 */
export class Channel {
  private partial: Uint8Array[] = [];
  private partialLen = 0;
  private broken = false;

  constructor(
    private readonly tx: CipherState,
    private readonly rx: CipherState,
    private readonly cap = MAX_FRAME,
  ) {}

  static from(e: Established, cap = MAX_FRAME): Channel {
    return new Channel(e.send, e.recv, cap);
  }

  /** One Noise message per chunk of at most CHUNK bytes, flag 1 while more follow. */
  seal(frame: Uint8Array): Uint8Array[] {
    if (this.broken) throw new NoiseError("the stream already failed");
    const count = Math.max(1, Math.ceil(frame.length / CHUNK));
    const out: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      const chunk = frame.subarray(i * CHUNK, Math.min(frame.length, (i + 1) * CHUNK));
      const plain = new Uint8Array(chunk.length + 1);
      plain[0] = i + 1 < count ? 1 : 0;
      plain.set(chunk, 1);
      out.push(this.tx.encryptWithAd(EMPTY, plain));
    }
    return out;
  }

  /** Decrypts one message: the whole frame when this chunk ended one, else null. */
  open(msg: Uint8Array): Uint8Array | null {
    if (this.broken) throw new NoiseError("the stream already failed");
    try {
      if (msg.length > MAX_NOISE_MESSAGE) throw new NoiseError("a Noise message over 65535 bytes");
      const plain = this.rx.decryptWithAd(EMPTY, msg);
      if (plain.length === 0) throw new NoiseError("an empty transport message");
      const flag = plain[0]!;
      if (flag > 1) throw new NoiseError(`chunk flag ${flag} is neither 0 nor 1`);
      const chunk = plain.subarray(1);
      if (this.partialLen + chunk.length > this.cap) throw new NoiseError(`a frame over ${this.cap} bytes`);
      this.partial.push(chunk);
      this.partialLen += chunk.length;
      if (flag === 1) return null;
      const frame = concat(...this.partial);
      this.partial = [];
      this.partialLen = 0;
      return frame;
    } catch (e) {
      this.broken = true;
      this.partial = [];
      this.partialLen = 0;
      throw e instanceof NoiseError ? e : new NoiseError(String(e));
    }
  }

  /** Whether a frame is half received (it is dropped, never parsed, when the stream ends). */
  get pending(): boolean {
    return this.partial.length > 0;
  }
}

/** base64url without padding, as the relay protocol writes keys. */
export function toB64u(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function fromB64u(s: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) return null;
  const std = s.replace(/-/g, "+").replace(/_/g, "/");
  let bin: string;
  try {
    bin = atob(std + "=".repeat((4 - (std.length % 4)) % 4));
  } catch {
    return null;
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  // Only the canonical spelling: stray low bits in the last character are refused.
  return toB64u(out) === s ? out : null;
}
