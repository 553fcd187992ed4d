/**
 * The connector binary's backstop gives the same refusals, at the process level. Needs the
 * built binary: JUCODE_COTAL_JCODE_BIN (xtask's CI step sets it after `cargo build`).
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, it } from "node:test";
import { REFUSALS, type RefusalKey } from "../src/refusals.js";
import { fixture } from "./support.js";

interface RefusalFixture {
  prefix: string;
  exitCode: number;
  refusals: Record<RefusalKey, { message: string; args: string[] }>;
}

const bin = process.env.JUCODE_COTAL_JCODE_BIN;
const skip = bin ? false : "JUCODE_COTAL_JCODE_BIN is not set (cargo xtask ci sets it to the built binary)";

describe("jucode-cotal-jcode refuses what the extension refuses", { skip }, () => {
  const f = fixture<RefusalFixture>("refusals.json");
  for (const [key, { message, args }] of Object.entries(f.refusals) as [RefusalKey, { message: string; args: string[] }][]) {
    for (const arg of args) {
      it(`${arg}: exit ${f.exitCode}, the extension's text`, () => {
        const r = spawnSync(bin ?? "", ["--no-events", arg], {
          env: { PATH: "/usr/bin:/bin", COTAL_SPACE: "dev", COTAL_NAME: "alice", COTAL_SERVERS: "nats://127.0.0.1:9" },
          encoding: "utf8",
          timeout: 20_000,
        });
        assert.equal(r.status, f.exitCode, r.stderr);
        assert.equal(r.stderr, `${f.prefix}${REFUSALS[key]}\n`);
        assert.equal(REFUSALS[key], message);
        assert.equal(r.stdout, "");
      });
    }
  }
});
