/**
 * A stand-in for the Cotal manager's side of the connector contract, written from its
 * documentation: the preflights it runs before provisioning (default-deny capabilities, the
 * `requires` PATH inventory, the readiness window), the `buildLaunch` call, the checks it makes
 * of the returned `LaunchSpec`, and the resume document it reads for `cotal ps --wide`.
 */

import { statSync } from "node:fs";
import { isAbsolute } from "node:path";
import type { Connector, LaunchOpts, LaunchSpec } from "../src/contract.js";
import { readResumeRecord, resumeDocument, type ResumeDocument } from "../src/seat-home.js";

/** The manager's generic presence window when a connector declares none. */
export const GENERIC_READINESS_MS = 30_000;

export class ManagerRefusal extends Error {}

/** Variables that carry secrets directly; never beside launch material. */
const DIRECT_SECRETS = [
  "COTAL_CREDS", "COTAL_SERVERS", "COTAL_TOKEN", "COTAL_CONTROL_TOKEN", "COTAL_OWNER", "COTAL_ACTOR",
  "COTAL_SENTINEL_CREDS", "COTAL_BEARER_CMD", "COTAL_EVENTS_REQUIRED",
];

export interface Spawned {
  spec: LaunchSpec;
  readinessMs: number;
  resume?: ResumeDocument;
  buildCalls: number;
}

export class ContractManager {
  buildCalls = 0;
  constructor(
    private readonly connector: Connector,
    /** What the boot inventory found on PATH, by `requires` name. */
    private readonly onPath: Record<string, string>,
  ) {}

  /** The presence window for this connector; a bad declaration is refused. */
  readinessMs(): number {
    const d = this.connector.readinessTimeoutMs;
    if (d === undefined) return GENERIC_READINESS_MS;
    if (!Number.isSafeInteger(d) || d <= 0)
      throw new ManagerRefusal(`connector ${this.connector.name} declares an invalid readinessTimeoutMs`);
    return d;
  }

  /** Everything refused before a credential or durable is minted. */
  preflight(opts: LaunchOpts): Readonly<Record<string, string>> {
    const c = this.connector;
    if (c.name === "cotal") throw new ManagerRefusal("a connector may not be named cotal");
    if (opts.resume !== undefined && !c.supportsResume)
      throw new ManagerRefusal(`connector ${c.name} cannot resume a session`);
    if (opts.continueSession !== undefined && !c.supportsSessionContinuation)
      throw new ManagerRefusal(`connector ${c.name} cannot continue an exact session`);
    if (opts.variant !== undefined && !c.supportsModelVariant)
      throw new ManagerRefusal(`connector ${c.name} takes no model variant`);
    if (opts.prompt !== undefined && !c.supportsPrompt)
      throw new ManagerRefusal(`connector ${c.name} takes no initial prompt`);
    if (opts.events === true && !c.eventChannel)
      throw new ManagerRefusal(`connector ${c.name} has no event channel`);
    const resolved: Record<string, string> = {};
    for (const name of c.requires ?? []) {
      const p = this.onPath[name];
      if (!p) throw new ManagerRefusal(`${name} is not on PATH (required by connector ${c.name})`);
      resolved[name] = p;
    }
    return resolved;
  }

  /** Preflight, then build the launch and check what came back. */
  spawn(opts: LaunchOpts, principal = { owner: "local", actor: opts.name }): Spawned {
    const readinessMs = this.readinessMs();
    const resolvedBinaries = this.preflight(opts);
    const full: LaunchOpts = { ...opts, resolvedBinaries };
    // The manager mints the publish grant for the declared event channel.
    if (opts.events !== false && this.connector.eventChannel)
      full.allowPublish = [...(opts.allowPublish ?? []), this.connector.eventChannel(principal)];
    this.buildCalls++;
    const spec = this.connector.buildLaunch(full);
    checkSpec(spec);
    const out: Spawned = { spec, readinessMs, buildCalls: this.buildCalls };
    if (spec.resumeRecordPath) {
      const rec = readResumeRecord(spec.resumeRecordPath);
      if (rec) out.resume = resumeDocument(rec);
    }
    return out;
  }
}

/** What the manager requires of a `LaunchSpec` before it spawns it. */
export function checkSpec(spec: LaunchSpec): void {
  if (typeof spec.command !== "string" || !isAbsolute(spec.command))
    throw new ManagerRefusal("LaunchSpec.command must be an absolute path");
  if (!Array.isArray(spec.args) || spec.args.some((a) => typeof a !== "string"))
    throw new ManagerRefusal("LaunchSpec.args must be strings");
  const env = spec.env ?? {};
  for (const [k, v] of Object.entries(env))
    if (typeof v !== "string") throw new ManagerRefusal(`LaunchSpec.env.${k} is not a string`);
  if (env.COTAL_LAUNCH_MATERIAL) {
    const direct = DIRECT_SECRETS.filter((k) => k in env);
    if (direct.length) throw new ManagerRefusal(`launch material and direct secrets together: ${direct.join(", ")}`);
  }
  if (spec.control) {
    if (typeof spec.control.path !== "string" || typeof spec.control.token !== "string" || !spec.control.token)
      throw new ManagerRefusal("LaunchSpec.control needs a path and a token");
    if (env.COTAL_CONTROL_SOCKET !== spec.control.path)
      throw new ManagerRefusal("the control socket in the environment is not LaunchSpec.control.path");
  }
  for (const dir of spec.artifacts ?? [])
    if (!statSync(dir).isDirectory()) throw new ManagerRefusal(`artifact ${dir} is not a directory`);
  if (spec.resumeRecordPath !== undefined && !isAbsolute(spec.resumeRecordPath))
    throw new ManagerRefusal("LaunchSpec.resumeRecordPath must be absolute");
}
