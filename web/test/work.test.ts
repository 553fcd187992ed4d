// The work view's model: the order of requirements and dispatches, the gate's next step,
// progress sections, proposals in words, the images the page agrees to show, the route a
// notification names.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  gateLang,
  gateStep,
  isRequirementId,
  progressParts,
  proposalText,
  requirementFromSearch,
  requirementTitle,
  safeImageUrl,
  sortDispatches,
  sortRequirements,
  waitsForUser,
  workWaiting,
} from "../src/work/model";
import { parseRoute, routePath } from "../src/core/route";

test("what waits for the user sorts first, then the latest change", () => {
  const list = [
    { id: "R-1", status: "running", updated_at: 9 },
    { id: "R-2", status: "done", updated_at: 10 },
    { id: "R-3", status: "review", updated_at: 1 },
    { id: "R-4", status: "confirm", updated_at: 2 },
    { id: "R-5", status: "review", updated_at: 5 },
    { id: "R-6", status: "something-new", updated_at: 50 },
  ];
  assert.deepEqual(
    sortRequirements(list).map((r) => r.id),
    ["R-4", "R-5", "R-3", "R-1", "R-2", "R-6"],
  );
  assert.equal(waitsForUser({ status: "approval" }), true);
  assert.equal(waitsForUser({ status: "running" }), false);
  assert.equal(waitsForUser({ status: "<img>" }), false);
});

test("a requirement's title is the daemon's, else its first line clipped", () => {
  assert.equal(requirementTitle({ id: "R-1", title: " Fast search ", text: "x" }), "Fast search");
  assert.equal(requirementTitle({ id: "R-1", title: "", text: "first\nsecond" }), "first");
  const long = "a".repeat(80);
  assert.equal(requirementTitle({ id: "R-1", text: long }), `${"a".repeat(59)}…`);
  assert.equal(requirementTitle({ id: "R-9", text: "" }), "R-9");
});

test("the gate's step says what confirming starts", () => {
  assert.equal(gateStep({ stage: "understand", plan: true }).confirm, "Confirm and ask for a plan");
  assert.equal(gateStep({ stage: "understand", plan: false }).confirm, "Confirm and start");
  assert.equal(gateStep({ stage: "plan", plan: true }).confirm, "Approve the plan and start");
});

test("progress shows only the lists with text items, in a fixed order", () => {
  const parts = progressParts({ next: ["ship"], done: ["a", 3, "", "b"], goal: "g", blocked: "not a list" });
  assert.deepEqual(parts, [
    { key: "done", label: "Done", items: ["a", "b"] },
    { key: "next", label: "Next", items: ["ship"] },
  ]);
  assert.deepEqual(progressParts(null), []);
});

test("proposals read as who proposes what", () => {
  assert.equal(proposalText({ kind: "create", agent: "ops" }), "Agent ops proposes to note this requirement.");
  assert.equal(proposalText({ kind: "close", outcome: "parked" }), "An agent proposes to close it as parked.");
  assert.equal(proposalText({ kind: "close", outcome: "<b>x</b>", agent: "ops" }), "Agent ops proposes to close it as done.");
});

test("only raster data URLs are shown as images", () => {
  assert.equal(safeImageUrl("data:image/png;base64,iVBORw0KGgo="), "data:image/png;base64,iVBORw0KGgo=");
  assert.equal(safeImageUrl("data:image/svg+xml;base64,PHN2Zz4="), null);
  assert.equal(safeImageUrl("javascript:alert(1)"), null);
  assert.equal(safeImageUrl("data:image/png;base64,abc\" onerror=\"x"), null);
  assert.equal(safeImageUrl(7), null);
});

test("the gate speaks Chinese to a Chinese browser, else English", () => {
  assert.equal(gateLang(["zh-CN", "en"]), "zh");
  assert.equal(gateLang(["en-GB", "zh-TW"]), "zh");
  assert.equal(gateLang(["de-DE"]), "en");
});

test("plans waiting for the user come first and count with the requirements", () => {
  const ds = [
    { id: "a", status: "done", created_at: 5 },
    { id: "b", status: "running", created_at: 1 },
    { id: "c", status: "awaiting", created_at: 0 },
    { id: "d", status: "running", created_at: 3 },
  ];
  assert.deepEqual(sortDispatches(ds).map((d) => d.id), ["c", "d", "b", "a"]);
  assert.equal(workWaiting([{ status: "confirm" }, { status: "open" }, { status: "proposed" }], ds), 3);
});

test("a notification's ?requirement= opens that requirement; work routes round-trip", () => {
  assert.equal(requirementFromSearch("?requirement=R-12"), "R-12");
  assert.equal(requirementFromSearch("?requirement=../x"), null);
  assert.equal(isRequirementId("R-"), false);
  assert.deepEqual(parseRoute("/remote", "?requirement=R-3"), { view: "requirement", id: "R-3" });
  assert.deepEqual(parseRoute("/remote/inbox", "?requirement=R-3"), { view: "inbox" });
  assert.deepEqual(parseRoute("/remote/work"), { view: "work" });
  assert.deepEqual(parseRoute("/remote/work/R-7"), { view: "requirement", id: "R-7" });
  assert.deepEqual(parseRoute("/remote/work/..%2Fx"), { view: "work" });
  assert.equal(routePath({ view: "requirement", id: "R-7" }), "/remote/work/R-7");
  assert.equal(routePath({ view: "work" }), "/remote/work");
});
