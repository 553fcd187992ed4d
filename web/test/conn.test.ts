// The connection against a scripted transport: replies by id, the protocol check on hello,
// reconnecting after a drop and stopping for good on a revoke.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Connection, type ConnState, type Frame } from "../src/core/conn";
import type { CloseInfo, Opener, TransportEvents } from "../src/core/transport";

function scripted() {
  const sent: string[] = [];
  let events: TransportEvents | null = null;
  let opens = 0;
  const opener: Opener = async (ev) => {
    opens += 1;
    events = ev;
    return { send: (t) => sent.push(t), close: () => {} };
  };
  return {
    opener,
    sent,
    opens: () => opens,
    deliver: (f: object) => events!.message(JSON.stringify(f)),
    drop: (info: CloseInfo) => events!.close(info),
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test("a reply resolves its request and other frames go to the handler", async () => {
  const t = scripted();
  const frames: Frame[] = [];
  const c = new Connection(t.opener, { frame: (f) => frames.push(f), state: () => {} });
  c.start();
  await tick();
  t.deliver({ type: "hello", protocol: 2, version: "x" });
  assert.equal(c.state.kind, "open");
  const reply = c.request("session_list");
  const sent = JSON.parse(t.sent[0]!);
  assert.equal(sent.op, "session_list");
  t.deliver({ type: "sessions", sessions: [] });
  t.deliver({ type: "sessions", id: sent.id, sessions: [{ session: "a" }] });
  const f = await reply;
  assert.deepEqual(f.sessions, [{ session: "a" }]);
  assert.deepEqual(
    frames.map((f) => f.type),
    ["hello", "sessions"],
  );
  const failing = c.request("agent_get", { agent: "x" });
  t.deliver({ type: "error", id: JSON.parse(t.sent[1]!).id, message: "unknown agent x" });
  await assert.rejects(failing, /unknown agent x/);
  c.stop();
});

test("a daemon of another protocol is left at once", async () => {
  const t = scripted();
  const states: ConnState[] = [];
  const c = new Connection(t.opener, { frame: () => {}, state: (s) => states.push(s) });
  c.start();
  await tick();
  t.deliver({ type: "hello", protocol: 3, version: "x" });
  assert.equal(c.state.kind, "stopped");
  assert.equal(c.state.kind === "stopped" && c.state.why, "incompatible");
});

test("a drop reconnects; a revoke stops for good", async () => {
  const t = scripted();
  let reopened = 0;
  const c = new Connection(t.opener, { frame: () => {}, state: () => {}, opened: () => (reopened += 1) });
  c.start();
  await tick();
  t.deliver({ type: "hello", protocol: 2, version: "x" });
  const inflight = c.request("ping");
  t.drop({ kind: "dropped", code: 1006, reason: "" });
  await assert.rejects(inflight, /closed/);
  assert.equal(c.state.kind, "reconnecting");
  c.retryNow();
  await tick();
  assert.equal(t.opens(), 2);
  t.deliver({ type: "hello", protocol: 2, version: "x" });
  assert.equal(reopened, 2);
  t.drop({ kind: "revoked", code: 1008, reason: "device revoked" });
  assert.equal(c.state.kind, "stopped");
  c.retryNow();
  await tick();
  assert.equal(t.opens(), 2, "a revoked device does not try again");
});
