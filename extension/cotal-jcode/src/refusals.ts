/**
 * What the spec says fails loud, refused before anything is provisioned. The connector binary
 * refuses the same requests with the same text (`bins/jucode-cotal-jcode/src/refusal.rs`) as a
 * backstop for any other launcher; `test/fixtures/refusals.json` holds the text both are
 * checked against.
 */

export type RefusalKey = "exact-session" | "share-tools" | "launch-options";

export const REFUSALS: Readonly<Record<RefusalKey, string>> = {
  "exact-session":
    "jcode connector: exact-session continuation is not supported: a seat owns a new private jcode instance, so attaching it to a session another owner may still hold would cross that boundary; use --resume, which forks the session into the seat",
  "share-tools":
    "jcode connector: --share-tools is not supported: the seat's private jcode configuration holds only the cotal MCP server, and merging other servers into it cannot be proven safe",
  "launch-options":
    "jcode connector: --opt launch options are not supported: the Harness API has no place for arbitrary connector flags or configuration, and an option that is not applied must not look honoured",
};

/** A launch the connector refuses; `key` says which rule, `message` is the operator's text. */
export class LaunchRefused extends Error {
  readonly key: RefusalKey | "launch";
  constructor(key: RefusalKey | "launch", message: string) {
    super(message);
    this.name = "LaunchRefused";
    this.key = key;
  }
}

export function refuse(key: RefusalKey, detail?: string): never {
  throw new LaunchRefused(key, detail ? `${REFUSALS[key]} (${detail})` : REFUSALS[key]);
}

/** Any other refused launch input, with its own message. */
export function refuseLaunch(message: string): never {
  throw new LaunchRefused("launch", `jcode connector: ${message}`);
}
