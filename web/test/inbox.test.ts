import { test } from "node:test";
import assert from "node:assert/strict";
import { canReopenQuestion, inboxLists, waitingCount } from "../src/inbox/model";

test("the inbox puts actions, questions and reports in one list, newest first", () => {
  const { open, done } = inboxLists(
    [{ id: "act-1", created_at: 20 }],
    [{ id: "act-0", created_at: 1, closed_at: 50, closed_reason: "allow" }],
    [{ id: "q-1", asked_at: 30 }],
    [{ id: "q-0", asked_at: 2, closed_at: 40, closed_reason: "answered" }],
    [{ id: "r-1", at: 10, read: false }, { id: "r-2", at: 35, read: true }],
  );
  assert.deepEqual(open.map((i) => i.key), ["r:r-2", "q:q-1", "a:act-1", "r:r-1"]);
  assert.deepEqual(open.map((i) => i.kind), ["report", "question", "action", "report"]);
  assert.deepEqual(done.map((i) => i.key), ["a:act-0", "q:q-0"]);
});

test("the nav counts open questions, pending actions and unread reports only", () => {
  assert.equal(waitingCount([{ id: "q" }], [{ id: "a" }, { id: "b" }], [{ read: false }, { read: true }]), 4);
  assert.equal(waitingCount([], [], [{ read: true }]), 0);
});

test("answered questions and those of a deleted agent cannot be reopened", () => {
  assert.equal(canReopenQuestion({ closed_by: "user", closed_reason: "answered" }), false);
  assert.equal(canReopenQuestion({ closed_by: "agent_deleted", closed_reason: "its agent was deleted" }), false);
  assert.equal(canReopenQuestion({ closed_by: "user", closed_reason: null }), true);
  assert.equal(canReopenQuestion({ closed_by: "deadline", closed_reason: "no answer by the deadline" }), true);
});
