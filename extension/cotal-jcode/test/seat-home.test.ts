import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseResumeRecord, RESUME_RECORD_FIELDS, resumeRecordPath, seatHome } from "../src/seat-home.js";
import { fixture } from "./support.js";

describe("the seat's private home", () => {
  it("is derived as the connector derives it (shared vectors)", () => {
    for (const v of fixture<{ space: string; name: string; leaf: string }[]>("seat-homes.json"))
      assert.equal(seatHome("/ws", v.space, v.name), join("/ws", ".cotal", "jcode", v.leaf), `${v.space}/${v.name}`);
    assert.equal(resumeRecordPath("/h"), "/h/cotal-resume.json");
  });
});

describe("the resume record", () => {
  const sample = fixture<Record<string, unknown>>("resume-record.json");

  it("has exactly the fields the connector writes", () => {
    assert.deepEqual(Object.keys(sample).sort(), [...RESUME_RECORD_FIELDS].sort());
    assert.deepEqual(parseResumeRecord(JSON.stringify(sample)), sample);
    assert.equal(parseResumeRecord(JSON.stringify({ ...sample, title: null })).title, null);
  });

  it("anything else is refused with the field named", () => {
    const bad = (v: unknown) => () => parseResumeRecord(JSON.stringify(v));
    assert.throws(bad({ ...sample, extra: 1 }), /unknown field extra/);
    assert.throws(bad({ ...sample, sha256: "xyz" }), /sha256/);
    assert.throws(bad({ ...sample, fork_session_id: "" }), /fork_session_id/);
    assert.throws(bad({ ...sample, title: 5 }), /title/);
    const { title: _t, ...noTitle } = sample;
    assert.throws(bad(noTitle), /title/);
    assert.throws(() => parseResumeRecord("{"), /not JSON/);
    assert.throws(bad([1]), /not an object/);
  });
});
