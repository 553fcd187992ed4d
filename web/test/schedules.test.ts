import { test } from "node:test";
import assert from "node:assert/strict";
import { describeRepeat, emptyForm, formFromTask, payload } from "../src/agents/schedule-model";

test("a new weekly task names its agent and sends sorted unique days", () => {
  const f = { ...emptyForm("ops"), name: "sweep", prompt: "go", repeat: "weekly" as const, time: "11:00", days: [5, 1, 3, 1] };
  assert.deepEqual(payload(f), { agent: "ops", name: "sweep", prompt: "go", repeat: "weekly", enabled: true, new_session: true, time: "11:00", days: [1, 3, 5] });
});

test("a cron task sends its expression and an empty time, and no days or date", () => {
  const f = { ...emptyForm("ops"), name: "c", prompt: "p", repeat: "cron" as const, cron: " 30 9 * * 1-5 " };
  const p = payload(f);
  assert.equal(p.cron, "30 9 * * 1-5");
  assert.equal(p.time, "");
  assert.ok(!("days" in p) && !("date" in p));
});

test("an edit sends the id and not the agent (the daemon refuses changing it)", () => {
  const t = { id: "sch-1", agent: "ops", name: "n", prompt: "p", repeat: "once", time: "08:00", date: "2027-01-02", days: [], enabled: false, new_session: false };
  const p = payload(formFromTask(t));
  assert.deepEqual(p, { id: "sch-1", name: "n", prompt: "p", repeat: "once", enabled: false, new_session: false, time: "08:00", date: "2027-01-02" });
});

test("repeats are described for people", () => {
  assert.equal(describeRepeat({ repeat: "weekly", time: "11:00", days: [1, 3] }), "Mon, Wed at 11:00");
  assert.equal(describeRepeat({ repeat: "cron", cron: "0 * * * *" }), "cron 0 * * * *");
  assert.equal(describeRepeat({ repeat: "hourly", time: "00:15" }), "hourly at minute 15");
});
