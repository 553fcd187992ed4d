// The session model folds the daemon's session events: streaming, tools, approvals, the
// transcript that replaces what is drawn, and the helpers the view uses.
import { test } from "node:test";
import assert from "node:assert/strict";
import { emptyState, matchCommands, reduce, splitBlocks, looksLikeDiff, diffClass, type SessionState } from "../src/session/model";

const fold = (frames: Record<string, unknown>[], s: SessionState = emptyState()) => frames.reduce(reduce, s);

test("a turn: user message, streamed answer, ready ends it", () => {
  const s = fold([
    { type: "user_message", content: "hi" },
    { type: "connecting" },
    { type: "assistant_start" },
    { type: "assistant_delta", delta: "Hel" },
    { type: "assistant_delta", delta: "lo" },
  ]);
  assert.equal(s.busy, true);
  assert.equal(s.items.length, 2);
  assert.deepEqual(s.items.map((i) => i.k), ["user", "assistant"]);
  const a = s.items[1]!;
  assert.ok(a.k === "assistant" && a.text === "Hello" && a.live);
  const done = reduce(s, { type: "status", message: "ready" });
  assert.equal(done.busy, false);
  assert.ok(done.items[1]!.k === "assistant" && !(done.items[1] as { live: boolean }).live);
  // Keys stay: the row is the same row.
  assert.equal(done.items[1]!.key, a.key);
});

test("reasoning, then a tool call updated and finished by call id", () => {
  const s = fold([
    { type: "thinking_start" },
    { type: "reasoning_delta", delta: "think" },
    { type: "assistant_start" },
    { type: "assistant_delta", delta: "Running" },
    { type: "tool_start", call_id: "c1", name: "bash" },
    { type: "tool_update", call_id: "c1", name: "bash", output: "partial" },
    { type: "tool_output", call_id: "c1", name: "bash", output: "a.txt\n", is_error: true },
  ]);
  assert.deepEqual(s.items.map((i) => i.k), ["reasoning", "assistant", "tool"]);
  const t = s.items[2]!;
  assert.ok(t.k === "tool" && t.done && t.isError && t.output === "a.txt\n");
  assert.ok(s.items[0]!.k === "reasoning" && !(s.items[0] as { live: boolean }).live, "reasoning stops when the answer starts");
});

test("approvals come and go by call id; ready and interrupted clear them", () => {
  const hunks = [{ id: "h1", file: "a.rs", header: "@@ -1 +1 @@", lines: ["-a", "+b"] }];
  let s = fold([
    { type: "approval_request", call_id: "c1", name: "edit", summary: "edit a.rs", hunks, subagent_id: null },
    { type: "approval_request", call_id: "c2", name: "bash", summary: "ls", hunks: null, scopes: ["session", "rule"] },
  ]);
  assert.equal(s.approvals.length, 2);
  assert.deepEqual(s.approvals[0]!.hunks, hunks);
  assert.deepEqual(s.approvals[1]!.scopes, ["session", "rule"]);
  s = reduce(s, { type: "tool_start", call_id: "c1", name: "edit" });
  assert.deepEqual(s.approvals.map((a) => a.callId), ["c2"]);
  s = reduce(s, { type: "action_deferred", call_id: "c2", name: "bash", summary: "ls" });
  assert.equal(s.approvals.length, 0);
  assert.ok(s.items.some((i) => i.k === "notice" && i.text.includes("Deferred")));
  s = reduce(s, { type: "approval_request", call_id: "c3", name: "bash", summary: "x" });
  assert.equal(reduce(s, { type: "status", message: "interrupted" }).approvals.length, 0);
});

test("a transcript replaces what was drawn: the same items twice give them once", () => {
  const items = [
    { role: "user", content: "a" },
    { role: "assistant", content: "echo: a" },
    { role: "tool", name: "bash", output: "ok" },
    { role: "branch", label: "fork" },
    { role: "mystery" },
  ];
  let s = fold([{ type: "user_message", content: "a" }, { type: "assistant_delta", delta: "echo: a" }]);
  s = reduce(s, { type: "transcript", items });
  s = reduce(s, { type: "transcript", items });
  assert.deepEqual(s.items.map((i) => i.k), ["user", "assistant", "tool", "branch"]);
  assert.equal(s.busy, false);
  // An empty one (the snapshot of a session not run since a restart) keeps what is drawn.
  assert.equal(reduce(s, { type: "transcript", items: [] }).items.length, 4);
  assert.equal(reduce(emptyState(), { type: "transcript", items: [] }).items.length, 0);
});

test("queue, notices, model and mode state", () => {
  const s = fold([
    { type: "pending_messages", messages: ["next", 3] },
    { type: "info", message: "request interrupted" },
    { type: "error", message: "boom" },
    { type: "command_list", commands: [{ command: "/model", args: "", description: "switch" }, { nope: 1 }] },
    { type: "approval_mode", mode: "auto" },
    { type: "approval_mode_pending", mode: "manual" },
    { type: "model_status", model: "m1", state: "ready" },
    { type: "status", message: "queued: 1" },
    { type: "unknown_future_event", x: 1 },
  ]);
  assert.deepEqual(s.pending, ["next"]);
  assert.deepEqual(s.items.map((i) => (i.k === "notice" ? i.level : i.k)), ["info", "error"]);
  assert.equal(s.commands.length, 1);
  assert.equal(s.mode, "auto");
  assert.equal(s.modePending, "manual");
  assert.equal(s.model?.model, "m1");
  assert.equal(s.status, "queued: 1");
  assert.equal(reduce(s, { type: "unknown_future_event" }), s, "unknown events change nothing");
});

test("splitBlocks cuts at blank lines but never inside a code fence", () => {
  assert.deepEqual(splitBlocks("a\nb\n\nc"), ["a\nb\n", "c"]);
  const fenced = "x\n\n```\none\n\ntwo\n```\n\ny";
  const blocks = splitBlocks(fenced);
  assert.equal(blocks.length, 3);
  assert.ok(blocks[1]!.includes("one\n\ntwo"), "the fence stays whole");
  assert.equal(blocks.join("").replace(/\n/g, ""), fenced.replace(/\n/g, ""));
  assert.deepEqual(splitBlocks(""), []);
  // An unclosed fence (mid-stream) keeps the rest in one block.
  assert.equal(splitBlocks("a\n\n```js\nlet x;\n\nlet y;").length, 2);
});

test("diff helpers and slash command matching", () => {
  assert.ok(looksLikeDiff("@@ -1,2 +1,2 @@\n-a\n+b"));
  assert.ok(!looksLikeDiff("total 3\n-rw-r--r-- a"));
  assert.deepEqual(["+a", "-b", "@@ x", "+++ b/f", " c"].map(diffClass), ["add", "del", "hunk", "", ""]);
  const cmds = [{ command: "/model", args: "", description: "" }, { command: "/compact", args: "", description: "" }];
  assert.deepEqual(matchCommands(cmds, "/m").map((c) => c.command), ["/model"]);
  assert.equal(matchCommands(cmds, "/").length, 2);
  assert.equal(matchCommands(cmds, "/model x").length, 0);
  assert.equal(matchCommands(cmds, "model").length, 0);
});
