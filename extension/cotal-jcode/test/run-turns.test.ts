import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RunTurnLedger, runTurnFrame, type RunTurn } from "../src/run-turns.js";
import { fixture } from "./support.js";

type Step =
  | { op: "offer"; turn: RunTurn; expect: boolean }
  | { op: "carry"; send: number; text: string | null }
  | { op: "accepted"; send: number; turns: string[] }
  | { op: "notAccepted"; send: number }
  | { op: "yield"; turn: string; refusal: string | null }
  | { op: "settle"; turn: string }
  | { op: "openShown" | "unshown"; turns: string[] };

describe("run turns ride the message that starts a Cotal-owned turn", () => {
  it("replays the shared scenario", () => {
    const { steps } = fixture<{ steps: Step[] }>("run-turns.json");
    const l = new RunTurnLedger();
    steps.forEach((s, i) => {
      const at = `step ${i} (${s.op})`;
      switch (s.op) {
        case "offer":
          assert.equal(l.offer(s.turn), s.expect, at);
          break;
        case "carry":
          assert.equal(l.carry(s.send) ?? null, s.text, at);
          break;
        case "accepted":
          assert.deepEqual(l.accepted(s.send), s.turns, at);
          break;
        case "notAccepted":
          l.notAccepted(s.send);
          break;
        case "yield":
          assert.equal(l.yieldRefusal(s.turn) ?? null, s.refusal, at);
          break;
        case "settle":
          l.settle(s.turn);
          break;
        case "openShown":
          assert.deepEqual(l.openShown(), s.turns, at);
          break;
        case "unshown":
          assert.deepEqual(l.unshown(), s.turns, at);
          break;
      }
    });
  });

  it("two turns offered before one send ride it together, in order", () => {
    const l = new RunTurnLedger();
    l.offer({ turn: "a", run: "r", step: "1", text: "x" });
    l.offer({ turn: "b", run: "r", step: "2", text: "y" });
    const text = l.carry(7) ?? "";
    assert.ok(text.indexOf("turn a") < text.indexOf("turn b"), text);
    assert.deepEqual(l.accepted(7), ["a", "b"]);
    assert.deepEqual(l.accepted(7), [], "an acceptance is counted once");
  });
});

describe("the manager hands a seat its run turn over the control socket", () => {
  it("builds the frame the seat takes", () => {
    const f = fixture<{ token: string; turn: RunTurn; frame: unknown }>("run-turn-frame.json");
    const line = runTurnFrame(f.token, f.turn);
    assert.ok(line.endsWith("\n") && !line.slice(0, -1).includes("\n"), "one NDJSON line");
    assert.deepEqual(JSON.parse(line), f.frame);
  });
  it("refuses a turn the seat would refuse", () => {
    assert.throws(() => runTurnFrame("t", { turn: "", run: "r", step: "s", text: "x" }), /turn must be/);
  });
});
