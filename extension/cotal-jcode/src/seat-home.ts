/**
 * Where the connector keeps a seat's private jcode home, and the resume record it writes
 * there when it forks a session (`--resume`). The path derivation mirrors
 * `jucode_jcode::home::PrivateHome::prepare`; `test/fixtures/seat-homes.json` holds the vectors
 * both sides are tested against.
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

/** Lower-case ASCII alphanumerics, every other character a dash, at most 32 characters. */
function slug(s: string): string {
  let out = "";
  for (const c of Array.from(s).slice(0, 32)) out += /^[A-Za-z0-9]$/.test(c) ? c.toLowerCase() : "-";
  return out || "x";
}

/** `<workspace>/.cotal/jcode/<slug(space-name)>-<sha256(space\0name)[:12]>`. */
export function seatHome(workspace: string, space: string, name: string): string {
  const key = createHash("sha256").update(space).update("\0").update(name).digest("hex");
  return join(workspace, ".cotal", "jcode", `${slug(`${space}-${name}`)}-${key.slice(0, 12)}`);
}

/** The file `LaunchSpec.resumeRecordPath` names. */
export function resumeRecordPath(home: string): string {
  return join(home, "cotal-resume.json");
}

/** What the seat records when it forks (`jucode_jcode::fork::ResumeRecord`). */
export interface ResumeRecord {
  /** The session `--resume` named, in the operator's jcode home. */
  source_session_id: string;
  /** Its title when it was read (at most 1024 characters), if it had one. */
  title: string | null;
  /** SHA-256 (hex) of the snapshot bytes followed by the journal bytes that were read. */
  sha256: string;
  /** The seat's own session, forked from the source. */
  fork_session_id: string;
  /** When the fork was written (RFC 3339). */
  forked_at: string;
}

export const RESUME_RECORD_FIELDS = [
  "source_session_id",
  "title",
  "sha256",
  "fork_session_id",
  "forked_at",
] as const satisfies readonly (keyof ResumeRecord)[];

/** The resume document `cotal ps --wide` shows, made from a record. */
export interface ResumeDocument {
  forkedFrom: string;
  title?: string;
  sha256: string;
  session: string;
  forkedAt: string;
}

/** Parse a record strictly: every field present and of its type, nothing else. */
export function parseResumeRecord(text: string): ResumeRecord {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`resume record is not JSON: ${(e as Error).message}`);
  }
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new Error("resume record is not an object");
  const rec = raw as Record<string, unknown>;
  for (const k of Object.keys(rec))
    if (!(RESUME_RECORD_FIELDS as readonly string[]).includes(k)) throw new Error(`resume record has an unknown field ${k}`);
  for (const k of ["source_session_id", "sha256", "fork_session_id", "forked_at"] as const)
    if (typeof rec[k] !== "string" || !rec[k]) throw new Error(`resume record field ${k} is not a non-empty string`);
  if (!("title" in rec) || (rec.title !== null && typeof rec.title !== "string"))
    throw new Error("resume record field title is not a string or null");
  if (!/^[0-9a-f]{64}$/.test(rec.sha256 as string)) throw new Error("resume record field sha256 is not a SHA-256 in hex");
  return rec as unknown as ResumeRecord;
}

/** Read the record at `path`; `undefined` when the seat never forked. */
export function readResumeRecord(path: string): ResumeRecord | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  return parseResumeRecord(text);
}

export function resumeDocument(rec: ResumeRecord): ResumeDocument {
  return {
    forkedFrom: rec.source_session_id,
    ...(rec.title !== null ? { title: rec.title } : {}),
    sha256: rec.sha256,
    session: rec.fork_session_id,
    forkedAt: rec.forked_at,
  };
}
