/**
 * `@jucode/cotal-connector-jcode-rs`: a Cotal connector extension that launches
 * `jucode-cotal-jcode` (the Rust jcode seat of this repository) as a managed Cotal seat.
 *
 * Cotal's manager loads the package and registers the connector: pass its registry to
 * {@link register} (or register {@link jcodeRsConnector} yourself).
 */

import type { ConnectorRegistry } from "./contract.js";
import { jcodeRsConnector } from "./extension.js";

export * from "./contract.js";
export * from "./extension.js";
export { LaunchRefused, REFUSALS, type RefusalKey } from "./refusals.js";
export { seatHome, resumeRecordPath, readResumeRecord, parseResumeRecord, resumeDocument, RESUME_RECORD_FIELDS, type ResumeRecord, type ResumeDocument } from "./seat-home.js";
export * from "./run-turns.js";

export function register(registry: ConnectorRegistry): void {
  registry.register(jcodeRsConnector);
}
