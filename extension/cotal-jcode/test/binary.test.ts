/**
 * The connector binary's backstop gives the same refusals, at the process level. Needs the
 * built binary: JUCODE_COTAL_JCODE_BIN (xtask's CI step sets it after `cargo build`).
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createServer } from "node:net";
import { describe, it } from "node:test";
import { buildLaunchIn, jcodeRsConnector, listModelsIn, parseCatalog } from "../src/extension.js";
import { REFUSALS, type RefusalKey } from "../src/refusals.js";
import { fixture, sandbox } from "./support.js";

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

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const addr = srv.address();
  await new Promise<void>((r) => srv.close(() => r()));
  if (!addr || typeof addr === "string") throw new Error("no port");
  return addr.port;
}

describe("jucode-cotal-jcode takes the launch buildLaunch makes", { skip }, () => {
  it("reads identity, grants and the launch material, then dials the material's broker", async () => {
    const sb = sandbox();
    const port = await closedPort();
    const spec = buildLaunchIn(
      {
        space: "dev",
        name: "alice",
        role: "reviewer",
        workspaceRoot: sb.workspace,
        servers: `nats://127.0.0.1:${port}`,
        subscribe: ["general"],
        capabilities: ["spawn"],
        model: "gpt-5.6-sol",
        variant: "high",
        prompt: "Review the change.",
        resolvedBinaries: { "jucode-cotal-jcode": bin ?? "", jcode: sb.jcodeBin },
      },
      sb.ctx({ PATH: "/usr/bin:/bin" }),
    );
    const material = spec.env?.COTAL_LAUNCH_MATERIAL ?? "";
    assert.ok(existsSync(material));
    const r = spawnSync(spec.command, spec.args, { env: spec.env, encoding: "utf8", timeout: 20_000 });
    // The seat got past its launch contract (every variable and the material parsed) and failed
    // only where a broker was needed, naming the server the material carried.
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`cannot connect to nats://127\\.0\\.0\\.1:${port}`));
    assert.ok(!existsSync(material), "the seat read the launch material once and unlinked it");
  });
});

describe("listModels reads the declared catalog through the seat binary", { skip }, () => {
  const caveat = { declared: true, providerVerified: false, note: "variants (declared, not provider-verified)" };
  it("returns the catalog as the manager's ModelCatalog, each tier marked declared", () => {
    const sb = sandbox();
    writeFileSync(
      join(sb.operatorHome, ".jcode", "config.toml"),
      '[providers.fake]\nmodel_catalog = true\n[[providers.fake.models]]\nid = "m1"\nreasoning_efforts = ["low", "high"]\n[[providers.fake.models]]\nid = "m2"\n[providers.off]\ntype = "openai-compatible"\n',
    );
    const env = { PATH: "/usr/bin:/bin", HOME: sb.operatorHome, JUCODE_COTAL_JCODE_BIN: bin };
    assert.ok(jcodeRsConnector.listModels, "the connector declares listModels");
    assert.deepEqual(listModelsIn({ env, cwd: sb.workspace, platform: "linux" }), {
      source: join(sb.operatorHome, ".jcode", "config.toml"),
      models: [
        { id: "m1", provider: "fake", variants: [{ name: "low", options: caveat }, { name: "high", options: caveat }] },
        { id: "m2", provider: "fake" },
      ],
    });
  });
  it("fails loud on a catalog without models, naming the provider", () => {
    const sb = sandbox();
    writeFileSync(join(sb.operatorHome, ".jcode", "config.toml"), "[providers.x]\nmodel_catalog = true\n");
    const env = { PATH: "/usr/bin:/bin", HOME: sb.operatorHome, JUCODE_COTAL_JCODE_BIN: bin };
    assert.throws(() => listModelsIn({ env, cwd: sb.workspace, platform: "linux" }), /providers\.x/);
  });
  it("refuses malformed binary output rather than pass it on", () => {
    assert.throws(() => parseCatalog('{"source":"s","models":[{"provider":"p"}]}'), /models\[0\]\.id/);
    assert.throws(() => parseCatalog("[]"), /not an object/);
  });
});
