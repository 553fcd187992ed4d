/** Temporary workspaces, a fake seat binary on PATH, and the shared fixtures. */

import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BuildContext } from "../src/extension.js";

export function fixture<T>(name: string): T {
  return JSON.parse(readFileSync(new URL(`../../test/fixtures/${name}`, import.meta.url), "utf8")) as T;
}

export interface Sandbox {
  root: string;
  workspace: string;
  bin: string;
  seatBin: string;
  jcodeBin: string;
  launches: string;
  operatorHome: string;
  ctx(env?: NodeJS.ProcessEnv): BuildContext;
}

export function sandbox(): Sandbox {
  const root = mkdtempSync(join(tmpdir(), "cotal-jcode-test-"));
  const workspace = join(root, "ws");
  const bin = join(root, "bin");
  const launches = join(root, "launches");
  const operatorHome = join(root, "home");
  for (const d of [workspace, bin, launches, join(operatorHome, ".jcode", "sessions")]) mkdirSync(d, { recursive: true });
  const seatBin = join(bin, "jucode-cotal-jcode");
  const jcodeBin = join(bin, "jcode");
  for (const p of [seatBin, jcodeBin]) {
    writeFileSync(p, "#!/bin/sh\nexit 0\n");
    chmodSync(p, 0o755);
  }
  return {
    root,
    workspace,
    bin,
    seatBin,
    jcodeBin,
    launches,
    operatorHome,
    ctx: (env = {}) => ({
      env: { PATH: bin, HOME: operatorHome, ...env },
      cwd: workspace,
      platform: "linux",
      tmpdir: launches,
    }),
  };
}
