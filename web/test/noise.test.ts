// The Noise layer against published vectors and its own failure rules.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CHUNK,
  Channel,
  HandshakeState,
  MAX_NOISE_MESSAGE,
  NoiseError,
  PROLOGUE,
  dh,
  fromB64u,
  generateKeyPair,
  initiator,
  publicKey,
  toB64u,
  type KeyPair,
} from "../src/relay/noise";

const hex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));
const toHex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const kp = (priv: string): KeyPair => ({ priv: hex(priv), pub: publicKey(hex(priv)) });

interface Vector {
  source: string;
  init_prologue: string;
  init_static: string;
  init_ephemeral: string;
  init_remote_static: string;
  resp_static: string;
  resp_ephemeral: string;
  handshake_hash?: string;
  messages: { payload: string; ciphertext: string }[];
}

// Noise_IK_25519_ChaChaPoly_SHA256 from the vector files the `snow` crate ships
// (snow 0.10.0, tests/vectors/cacophony.txt and tests/vectors/snow.txt), copied verbatim.
const VECTORS: Vector[] = [
  {
    "init_prologue": "4a6f686e2047616c74",
    "init_static": "e61ef9919cde45dd5f82166404bd08e38bceb5dfdfded0a34c8df7ed542214d1",
    "init_ephemeral": "893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a",
    "init_remote_static": "31e0303fd6418d2f8c0e78b91f22e8caed0fbe48656dcf4767e4834f701b8f62",
    "resp_static": "4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893",
    "resp_ephemeral": "bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b",
    "handshake_hash": "0b0f68fb0c27e03ce9b97565995ed4838cc0581b762ef72b062f6a546419fad7",
    "messages": [
      {
        "payload": "4c756477696720766f6e204d69736573",
        "ciphertext": "ca35def5ae56cec33dc2036731ab14896bc4c75dbb07a61f879f8e3afa4c7944718da798efbcd91528520204f904b9bd6c7413dccdc214d951e15253e39987f18146e8cd0873654207148333479d4d16c289f0294b29960a72f48e0b7bba2e89083169825e59642148d492020664ccf7"
      },
      {
        "payload": "4d757272617920526f746862617264",
        "ciphertext": "95ebc60d2b1fa672c1f46a8aa265ef51bfe38e7ccb39ec5be34069f1448088435361e70b2ed446e6c9ec387d1d6b3b840f194e373979d241b203c4acafccf5"
      },
      {
        "payload": "462e20412e20486179656b",
        "ciphertext": "050e9f3c8fac16b68dbce8f8c4bfbf6617c897f9ada4aa29aa19c8"
      },
      {
        "payload": "4361726c204d656e676572",
        "ciphertext": "344233a6cabb7141d80f3da2fedc311d9646bbb0f505afe403a667"
      },
      {
        "payload": "4a65616e2d426170746973746520536179",
        "ciphertext": "62cdeeb172ad7ade7aa7d9e069da5790f12331bfa00177787a1d0810c67dc3b2b4"
      },
      {
        "payload": "457567656e2042f6686d20766f6e2042617765726b",
        "ciphertext": "029bead1b40992327044d409d9a1f3ad8f36c3c452775d557e18bbeb2e8dfcead32d514024"
      }
    ],
    "source": "cacophony cacophony.txt"
  },
  {
    "init_prologue": "5468657265206973206e6f20726967687420616e642077726f6e672e2054686572652773206f6e6c792066756e20616e6420626f72696e672e",
    "init_static": "f49f93c5112c0787acc808d61716d7e090e076a58f15a3f78d92773f8dcb473b",
    "init_ephemeral": "dae68498c41315cff7e4a34dded8d973199d8f0cf3fcb8b6651c169de77de8be",
    "init_remote_static": "2ea5942829bac414e25aa4cbb1bcc43394816ebb1bd12550d7d0eb4415e42951",
    "resp_static": "b790546f98b1e933c48cd01f17e7b281469d46fcacc9a3b584ae65b1d6272e8e",
    "resp_ephemeral": "c0875a5b59c8492bd2135e5432d7d484f938e0a1f5009428c4bcb70b2f69f69f",
    "messages": [
      {
        "payload": "95a8f51c435a9530ff1f30868ed7b23ec952eb513c26a0774fed82d2978a8c81",
        "ciphertext": "6d21fec9141f3f37cc464e936a48b2d9521b5a44e0f3d960895d3c3fba30282f731f445c25e898e2534ac0536715b24308c108fc46bd260c887b36c3f68e3a05654fc8295c068ed53fb2022560961224e0b10b0835e1efc82fc587cd50f7178fe3d9eb06e0351c6e7334162c10bed670bfa2a105f7b2768a140b3fd597782601"
      },
      {
        "payload": "b866b807a6d8b83182b884dbfedc861843c5082bd6e480cb54e4245a72083041",
        "ciphertext": "e64e1fb8701c4f4bc3850b255fea657d4d835338b059c89acc99628fbe52473b41a4e79e3c1e6abc46bf80f078a005e15d8a3e04f989af3e6cb99b52031165006163ac3e17b928af8c116009d7bf4fb2"
      },
      {
        "payload": "e3a4937faef391028f759758b428b57652e0069a8dee64dfed01b60846938740",
        "ciphertext": "2bebe19102169cdfe79cf41e38930bfd20a5b2fc78ccf33e853ddd939c0983174656eb27b61464a607762848892ca1c0"
      },
      {
        "payload": "693972f27b0cb98aeac1fb54d782125431e7540e0cb2fa882cf51a8184d724fd",
        "ciphertext": "c7c56da33b45d12f4754e17978bd49999c9c8f51d00db460f902aba2e6e245d0c46662f507915de8596f43b1d175f1db"
      }
    ],
    "source": "snow snow.txt"
  }
];

function runVector(v: Vector): void {
  const init = new HandshakeState({
    initiator: true,
    prologue: hex(v.init_prologue),
    s: kp(v.init_static),
    rs: hex(v.init_remote_static),
    e: kp(v.init_ephemeral),
  });
  const resp = new HandshakeState({
    initiator: false,
    prologue: hex(v.init_prologue),
    s: kp(v.resp_static),
    e: kp(v.resp_ephemeral),
  });
  const [m1, m2, ...transport] = v.messages;
  const c1 = init.writeMessage(hex(m1!.payload));
  assert.equal(toHex(c1), m1!.ciphertext, `${v.source}: msg1`);
  assert.equal(toHex(resp.readMessage(c1)), m1!.payload);
  assert.equal(toHex(resp.remoteStatic()!), toHex(publicKey(hex(v.init_static))), "the responder learns our static key");
  const c2 = resp.writeMessage(hex(m2!.payload));
  assert.equal(toHex(c2), m2!.ciphertext, `${v.source}: msg2`);
  assert.equal(toHex(init.readMessage(c2)), m2!.payload);
  const a = init.split();
  const b = resp.split();
  assert.equal(toHex(a.hash), toHex(b.hash));
  if (v.handshake_hash) assert.equal(toHex(a.hash), v.handshake_hash, `${v.source}: handshake hash`);
  // Transport messages alternate, initiator first.
  transport.forEach((m, i) => {
    const [w, r] = i % 2 === 0 ? [a, b] : [b, a];
    const c = w.send.encryptWithAd(new Uint8Array(0), hex(m.payload));
    assert.equal(toHex(c), m.ciphertext, `${v.source}: transport message ${i}`);
    assert.equal(toHex(r.recv.decryptWithAd(new Uint8Array(0), c)), m.payload);
  });
}

test("the cacophony vector for Noise_IK_25519_ChaChaPoly_SHA256", () => {
  const v = VECTORS.find((x) => x.source.startsWith("cacophony"))!;
  // The values the relay protocol notes quote, so this is the right vector.
  assert.equal(v.init_prologue, "4a6f686e2047616c74");
  assert.ok(v.messages[0]!.ciphertext.startsWith("ca35def5") && v.messages[0]!.ciphertext.endsWith("64ccf7"));
  assert.ok(v.messages[1]!.ciphertext.startsWith("95ebc60d") && v.messages[1]!.ciphertext.endsWith("fccf5"));
  assert.ok(v.handshake_hash!.startsWith("0b0f68fb") && v.handshake_hash!.endsWith("fad7"));
  assert.equal(toHex(publicKey(hex(v.resp_static))), v.init_remote_static);
  runVector(v);
});

test("snow's own vector for the same pattern (32-byte payloads, another prologue)", () => {
  runVector(VECTORS.find((x) => x.source.startsWith("snow"))!);
});

test("a changed byte anywhere in the vector's msg1 or msg2 fails", () => {
  const v = VECTORS[0]!;
  const fresh = () => ({
    init: new HandshakeState({ initiator: true, prologue: hex(v.init_prologue), s: kp(v.init_static), rs: hex(v.init_remote_static), e: kp(v.init_ephemeral) }),
    resp: new HandshakeState({ initiator: false, prologue: hex(v.init_prologue), s: kp(v.resp_static), e: kp(v.resp_ephemeral) }),
  });
  const c1 = hex(v.messages[0]!.ciphertext);
  for (const at of [0, 31, 32, 79, c1.length - 1]) {
    const bad = c1.slice();
    bad[at]! ^= 0x01;
    assert.throws(() => fresh().resp.readMessage(bad), NoiseError, `msg1 byte ${at}`);
  }
  const c2 = hex(v.messages[1]!.ciphertext);
  for (const at of [0, 32, c2.length - 1]) {
    const { init } = fresh();
    init.writeMessage(hex(v.messages[0]!.payload));
    const bad = c2.slice();
    bad[at]! ^= 0x80;
    assert.throws(() => init.readMessage(bad), NoiseError, `msg2 byte ${at}`);
    assert.throws(() => init.split(), NoiseError, "no transport after a failed handshake");
  }
});

/** A handshake between two fresh parties on the relay's prologue, as the page and daemon run it. */
function pair(cap?: number): { page: Channel; daemon: Channel; msg1: Uint8Array } {
  const host = generateKeyPair();
  const phone = generateKeyPair();
  const i = initiator(phone, host.pub);
  const r = new HandshakeState({ initiator: false, prologue: PROLOGUE, s: host });
  const msg1 = i.writeMessage(new TextEncoder().encode(JSON.stringify({ name: "phone", pair: "K7QW2MZP" })));
  assert.deepEqual(JSON.parse(new TextDecoder().decode(r.readMessage(msg1))), { name: "phone", pair: "K7QW2MZP" });
  i.readMessage(r.writeMessage(new TextEncoder().encode('{"ok":true}')));
  return { page: Channel.from(i.split(), cap), daemon: Channel.from(r.split(), cap), msg1 };
}

test("chunking: 2*CHUNK+17 bytes is 3 messages, exactly CHUNK is 1, empty is 1", () => {
  const { page, daemon } = pair();
  for (const [len, count] of [
    [2 * CHUNK + 17, 3],
    [CHUNK, 1],
    [0, 1],
    [1, 1],
    [CHUNK - 1, 1],
    [CHUNK + 1, 2],
  ] as const) {
    const frame = Uint8Array.from({ length: len }, (_, i) => i % 251);
    const msgs = page.seal(frame);
    assert.equal(msgs.length, count, `${len} bytes`);
    for (const m of msgs) assert.ok(m.length <= MAX_NOISE_MESSAGE, `a message of ${m.length} bytes`);
    let got: Uint8Array | null = null;
    msgs.forEach((m, i) => {
      got = daemon.open(m);
      assert.equal(got === null, i + 1 < msgs.length, "only the last chunk completes the frame");
    });
    assert.deepEqual(got, frame);
    // And back the other way.
    const back = daemon.seal(frame);
    let out: Uint8Array | null = null;
    for (const m of back) out = page.open(m);
    assert.deepEqual(out, frame);
  }
  // The flag byte: 1 on every chunk but the last.
  const { page: p2 } = pair();
  const raw = pair();
  const msgs = raw.page.seal(new Uint8Array(CHUNK + 5));
  assert.equal(msgs[0]!.length, 1 + CHUNK + 16);
  assert.equal(msgs[1]!.length, 1 + 5 + 16);
  assert.equal(p2.seal(new Uint8Array(0))[0]!.length, 17, "an empty frame is one flag byte and a tag");
});

test("a tampered message fails and the channel refuses everything after it", () => {
  const { page, daemon } = pair();
  const [m] = daemon.seal(new TextEncoder().encode('{"type":"hello"}'));
  const bad = m!.slice();
  bad[5]! ^= 0x04;
  assert.throws(() => page.open(bad), NoiseError);
  assert.throws(() => page.open(m!), NoiseError, "broken for good: the stream must close");
});

test("a reordered, replayed or dropped message fails", () => {
  {
    const { page, daemon } = pair();
    const one = daemon.seal(new TextEncoder().encode("one"))[0]!;
    const two = daemon.seal(new TextEncoder().encode("two"))[0]!;
    assert.throws(() => page.open(two), NoiseError, "reordered");
    void one;
  }
  {
    const { page, daemon } = pair();
    const one = daemon.seal(new TextEncoder().encode("one"))[0]!;
    assert.equal(new TextDecoder().decode(page.open(one)!), "one");
    assert.throws(() => page.open(one), NoiseError, "replayed");
  }
  {
    // A message meant for the other direction does not decrypt either.
    const { page } = pair();
    const mine = page.seal(new TextEncoder().encode("mine"))[0]!;
    assert.throws(() => page.open(mine), NoiseError, "reflected");
  }
});

test("a frame half received is pending, never returned; the reassembly cap holds", () => {
  const { page, daemon } = pair();
  const msgs = daemon.seal(new Uint8Array(CHUNK + 10));
  assert.equal(page.open(msgs[0]!), null);
  assert.ok(page.pending);
  const small = pair(CHUNK + 5);
  const parts = small.daemon.seal(new Uint8Array(2 * CHUNK));
  assert.equal(small.page.open(parts[0]!), null);
  assert.throws(() => small.page.open(parts[1]!), /over/);
  assert.throws(() => page.open(new Uint8Array(MAX_NOISE_MESSAGE + 1)), /65535/);
});

test("a bad chunk flag or an empty plaintext fails", () => {
  // Build messages with the raw cipher state, as a broken daemon would.
  const host = generateKeyPair();
  const i = initiator(generateKeyPair(), host.pub);
  const r = new HandshakeState({ initiator: false, prologue: PROLOGUE, s: host });
  r.readMessage(i.writeMessage(new Uint8Array(0)));
  i.readMessage(r.writeMessage(new Uint8Array(0)));
  const page = Channel.from(i.split());
  const daemon = r.split();
  assert.throws(() => page.open(daemon.send.encryptWithAd(new Uint8Array(0), Uint8Array.of(2, 65))), /flag/);
  const page2 = (() => {
    const i2 = initiator(generateKeyPair(), host.pub);
    const r2 = new HandshakeState({ initiator: false, prologue: PROLOGUE, s: host });
    r2.readMessage(i2.writeMessage(new Uint8Array(0)));
    i2.readMessage(r2.writeMessage(new Uint8Array(0)));
    return { page: Channel.from(i2.split()), daemon: r2.split() };
  })();
  assert.throws(() => page2.page.open(page2.daemon.send.encryptWithAd(new Uint8Array(0), new Uint8Array(0))), /empty/);
});

test("the wrong host key: the daemon cannot read msg1", () => {
  const host = generateKeyPair();
  const other = generateKeyPair();
  const i = initiator(generateKeyPair(), other.pub);
  const r = new HandshakeState({ initiator: false, prologue: PROLOGUE, s: host });
  assert.throws(() => r.readMessage(i.writeMessage(new Uint8Array(0))), NoiseError);
  // And another prologue fails too.
  const i2 = new HandshakeState({ initiator: true, prologue: new TextEncoder().encode("jucode-relay-v2"), s: generateKeyPair(), rs: host.pub });
  const r2 = new HandshakeState({ initiator: false, prologue: PROLOGUE, s: host });
  assert.throws(() => r2.readMessage(i2.writeMessage(new Uint8Array(0))), NoiseError);
});

test("all-zero and low-order keys are refused", () => {
  const me = generateKeyPair();
  const zero = new Uint8Array(32);
  const one = new Uint8Array(32);
  one[0] = 1;
  const order8 = hex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800");
  for (const k of [zero, one, order8]) assert.throws(() => dh(me.priv, k), NoiseError, toHex(k));
  assert.throws(() => dh(me.priv, new Uint8Array(31)), NoiseError);
  assert.equal(dh(me.priv, generateKeyPair().pub).length, 32);
  // An initiator given a low-order host key fails at es, before anything is sent.
  assert.throws(() => initiator(me, order8).writeMessage(new Uint8Array(0)), NoiseError);
  // A msg2 whose ephemeral is low order fails at ee.
  const host = generateKeyPair();
  const i = initiator(me, host.pub);
  const r = new HandshakeState({ initiator: false, prologue: PROLOGUE, s: host });
  r.readMessage(i.writeMessage(new Uint8Array(0)));
  const msg2 = r.writeMessage(new Uint8Array(0));
  msg2.set(zero, 0);
  assert.throws(() => i.readMessage(msg2), /low-order/);
});

test("out-of-turn steps are refused", () => {
  const host = generateKeyPair();
  const i = initiator(generateKeyPair(), host.pub);
  assert.throws(() => i.readMessage(new Uint8Array(80)), /turn/);
  i.writeMessage(new Uint8Array(0));
  assert.throws(() => i.writeMessage(new Uint8Array(0)), /turn/);
  assert.throws(() => i.split(), NoiseError);
  assert.throws(() => new HandshakeState({ initiator: true, prologue: PROLOGUE, s: generateKeyPair() }), NoiseError);
});

test("base64url without padding, canonical spellings only", () => {
  const k = generateKeyPair().pub;
  const s = toB64u(k);
  assert.equal(s.length, 43);
  assert.deepEqual(fromB64u(s), k);
  assert.equal(fromB64u(s + "="), null);
  assert.equal(fromB64u("ab+/"), null);
  assert.equal(fromB64u("AB"), null, "stray bits in the last character");
  assert.deepEqual(fromB64u("AA"), Uint8Array.of(0));
});
