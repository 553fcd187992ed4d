// Pure helpers of the file browser and the diff view: sizes, breadcrumbs, porcelain codes and
// a unified diff split into files and typed lines. No DOM here (unit tested under node).

export interface Entry {
  name: string;
  dir: boolean;
  size: number;
}

export interface GitFile {
  path: string;
  status: string;
  from?: string;
}

export type LineKind = "add" | "del" | "hunk" | "meta" | "ctx";

export interface DiffLine {
  kind: LineKind;
  text: string;
}

export interface FileDiff {
  /** The new path (the old one for a deletion), from the `diff --git` header. */
  file: string;
  lines: DiffLine[];
  added: number;
  removed: number;
  binary: boolean;
}

export function formatSize(n: number): string {
  if (!Number.isFinite(n) || n < 0) return "";
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** Joins a directory and an entry name (names never hold a slash). */
export function join(dir: string, name: string): string {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

/** The breadcrumbs from `root` down to `dir`: each with its label and full path. */
export function crumbs(root: string, dir: string): { label: string; path: string }[] {
  const base = root.replace(/\/+$/, "") || "/";
  const label = base === "/" ? "/" : base.slice(base.lastIndexOf("/") + 1);
  const out = [{ label, path: base }];
  if (dir === base || !dir.startsWith(base === "/" ? "/" : base + "/")) return out;
  let at = base;
  for (const part of dir.slice(base.length).split("/").filter(Boolean)) {
    at = join(at, part);
    out.push({ label: part, path: at });
  }
  return out;
}

/** The parent of `dir`, never above `root`. */
export function parent(root: string, dir: string): string | null {
  if (dir === root || !dir.startsWith(root)) return null;
  const up = dir.slice(0, dir.lastIndexOf("/")) || "/";
  return up.length < root.length ? root : up;
}

const CODES: Record<string, string> = {
  M: "modified",
  A: "added",
  D: "deleted",
  R: "renamed",
  C: "copied",
  U: "conflict",
  T: "type changed",
  "?": "untracked",
  "!": "ignored",
};

/** A porcelain code (`" M"`, `"A "`, `"??"`, `"R "`) in words, staged side first. */
export function statusLabel(code: string): string {
  if (code === "??") return "untracked";
  const [x = " ", y = " "] = code;
  const parts: string[] = [];
  if (x !== " ") parts.push(`${CODES[x] ?? x} (staged)`);
  if (y !== " ") parts.push(CODES[y] ?? y);
  return parts.join(", ") || "unchanged";
}

/** The one letter a list shows for a porcelain code. */
export function statusLetter(code: string): string {
  if (code === "??") return "?";
  const c = code.trim();
  return c ? c[0] : "·";
}

/** The colour class of a porcelain code. */
export function statusClass(code: string): string {
  return code === "??" ? "s-new" : `s-${statusLetter(code)}`;
}

/** Splits a unified diff into one entry per file. */
export function parseDiff(text: string): FileDiff[] {
  const files: FileDiff[] = [];
  let cur: FileDiff | null = null;
  let inHunk = false;
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  for (const line of lines) {
    if (line.startsWith("diff --git ")) {
      cur = { file: headerFile(line), lines: [], added: 0, removed: 0, binary: false };
      files.push(cur);
      inHunk = false;
      cur.lines.push({ kind: "meta", text: line });
      continue;
    }
    if (!cur) {
      cur = { file: "", lines: [], added: 0, removed: 0, binary: false };
      files.push(cur);
    }
    if (line.startsWith("@@")) {
      inHunk = true;
      cur.lines.push({ kind: "hunk", text: line });
    } else if (inHunk && line.startsWith("+")) {
      cur.added += 1;
      cur.lines.push({ kind: "add", text: line });
    } else if (inHunk && line.startsWith("-")) {
      cur.removed += 1;
      cur.lines.push({ kind: "del", text: line });
    } else if (inHunk && (line.startsWith(" ") || line.startsWith("\\") || line === "")) {
      cur.lines.push({ kind: "ctx", text: line });
    } else {
      if (line.startsWith("+++ b/")) cur.file = line.slice(6);
      if (line.startsWith("Binary files ")) cur.binary = true;
      cur.lines.push({ kind: "meta", text: line });
    }
  }
  return files;
}

/** `b/<path>` of a `diff --git a/<x> b/<y>` line (paths may hold spaces). */
function headerFile(line: string): string {
  const rest = line.slice("diff --git ".length);
  const at = rest.lastIndexOf(" b/");
  return at >= 0 ? rest.slice(at + 3) : rest;
}
