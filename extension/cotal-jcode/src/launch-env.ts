/**
 * The environment and files a launch hands the connector process: an allow-listed base
 * environment (never the manager's ambient one), the seat's identity and grants as `COTAL_*`
 * variables, the secrets in an owner-only launch-material file, and the control endpoint.
 */

import { randomBytes } from "node:crypto";
import { closeSync, mkdtempSync, openSync, writeSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ControlEndpoint, LaunchOpts } from "./contract.js";

/** OS variables a process needs to run at all. */
export const OS_ENV = [
  "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "LANG", "LC_ALL", "LC_CTYPE",
  "LC_MESSAGES", "TZ", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
  "XDG_CACHE_HOME", "XDG_STATE_HOME",
] as const;

/** Machine-wide Cotal operator knobs, kept across the launch. */
export const OPERATOR_ENV = [
  "COTAL_HOME", "COTAL_FEEDBACK_KEY", "COTAL_FEEDBACK_EMAIL", "COTAL_FEEDBACK_URL",
  "COTAL_DEFAULT_AGENT", "COTAL_DEBUG", "COTAL_DETACH_KEY",
] as const;

/**
 * Inputs this connector declares: the operator's jcode home (credential inheritance and the
 * `--resume` source), provider keys jcode reads from the environment, the seat's log filter.
 */
export const CONNECTOR_ENV = [
  "JCODE_HOME", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY",
  "JUCODE_COTAL_LOG",
] as const;

/** The base environment: only allow-listed names that are set, plus `envAllow` extras. */
export function launchEnv(source: NodeJS.ProcessEnv, envAllow: readonly string[] = []): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of [...OS_ENV, ...OPERATOR_ENV, ...CONNECTOR_ENV, ...envAllow]) {
    const v = source[k];
    if (v !== undefined && v !== "") env[k] = v;
  }
  return env;
}

/** What `COTAL_LAUNCH_MATERIAL` names (`jucode_cotal::config` reads it once and unlinks it). */
export interface LaunchMaterial {
  servers?: string[];
  creds?: string;
  controlToken: string;
  userAuth?: { owner: string; actor: string; sentinelCredsPath: string; bearerCmd: string[] };
  eventsRequired?: boolean;
}

/** The private directory of one launch: the material file and the control socket live there. */
export interface LaunchDir {
  dir: string;
  control: ControlEndpoint;
  materialPath: string;
}

/** Make the 0700 directory, the control endpoint, and the 0600 material file (created exclusively). */
export function writeLaunchDir(material: Omit<LaunchMaterial, "controlToken">, base = tmpdir()): LaunchDir {
  const dir = mkdtempSync(join(base, "cotal-jcode-")); // mode 0700
  try {
    const control = { path: join(dir, "control.sock"), token: randomBytes(32).toString("hex") };
    const materialPath = join(dir, "launch-material.json");
    const doc: LaunchMaterial = { ...material, controlToken: control.token };
    const fd = openSync(materialPath, "wx", 0o600);
    try {
      writeSync(fd, JSON.stringify(doc));
    } finally {
      closeSync(fd);
    }
    return { dir, control, materialPath };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

/** `a,b` for a comma list variable; an entry holding a comma could not be read back. */
export function commaList(name: string, values: readonly string[]): string {
  for (const v of values)
    if (v.includes(",") || v.trim() !== v || v === "")
      throw new Error(`${name} entry ${JSON.stringify(v)} cannot travel in a comma list`);
  return values.join(",");
}

/** Identity and grants as `COTAL_*` variables (only those given). */
export function identityEnv(opts: LaunchOpts): Record<string, string> {
  const env: Record<string, string> = { COTAL_SPACE: opts.space, COTAL_NAME: opts.name };
  if (opts.role) env.COTAL_ROLE = opts.role;
  if (opts.id) env.COTAL_ID = opts.id;
  if (opts.lifecycleUid) env.COTAL_LIFECYCLE_UID = opts.lifecycleUid;
  if (opts.managerInstance) env.COTAL_MANAGER_INSTANCE = opts.managerInstance;
  if (opts.backfillFloor !== undefined) env.COTAL_BACKFILL_FLOOR = String(opts.backfillFloor);
  if (opts.acceptedToken) env.COTAL_ACCEPTED_TOKEN = opts.acceptedToken;
  const lists = [
    ["COTAL_SUBSCRIBE", opts.subscribe],
    ["COTAL_ALLOW_SUBSCRIBE", opts.allowSubscribe],
    ["COTAL_ALLOW_PUBLISH", opts.allowPublish],
    ["COTAL_CAPABILITIES", opts.capabilities],
    ["COTAL_QUIET", opts.quiet],
    ["COTAL_MUTED", opts.muted],
  ] as const;
  for (const [k, v] of lists) if (v && v.length) env[k] = commaList(k, v);
  return env;
}
