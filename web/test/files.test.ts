// The file browser's and diff view's pure helpers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { crumbs, formatSize, parent, parseDiff, statusLabel, statusLetter } from "../src/files/model";

test("sizes read like sizes", () => {
  assert.equal(formatSize(0), "0 B");
  assert.equal(formatSize(1023), "1023 B");
  assert.equal(formatSize(1536), "1.5 KB");
  assert.equal(formatSize(1024 * 1024 * 300), "300 MB");
  assert.equal(formatSize(-1), "");
});

test("breadcrumbs run from the root down and never above it", () => {
  assert.deepEqual(crumbs("/home/u/app", "/home/u/app"), [{ label: "app", path: "/home/u/app" }]);
  assert.deepEqual(crumbs("/home/u/app", "/home/u/app/src/ui"), [
    { label: "app", path: "/home/u/app" },
    { label: "src", path: "/home/u/app/src" },
    { label: "ui", path: "/home/u/app/src/ui" },
  ]);
  // A sibling that merely shares the prefix is not under the root.
  assert.deepEqual(crumbs("/home/u/app", "/home/u/application"), [{ label: "app", path: "/home/u/app" }]);
  assert.equal(parent("/home/u/app", "/home/u/app"), null);
  assert.equal(parent("/home/u/app", "/home/u/app/src/ui"), "/home/u/app/src");
  assert.equal(parent("/", "/etc"), "/");
});

test("porcelain codes in words", () => {
  assert.equal(statusLabel(" M"), "modified");
  assert.equal(statusLabel("A "), "added (staged)");
  assert.equal(statusLabel("R "), "renamed (staged)");
  assert.equal(statusLabel("MM"), "modified (staged), modified");
  assert.equal(statusLabel("??"), "untracked");
  assert.equal(statusLetter("??"), "?");
  assert.equal(statusLetter(" M"), "M");
});

test("a unified diff splits into files with typed lines", () => {
  const text = [
    "diff --git a/a.txt b/a.txt",
    "index 1..2 100644",
    "--- a/a.txt",
    "+++ b/a.txt",
    "@@ -1,2 +1,2 @@",
    " one",
    "-two",
    "+TWO",
    "diff --git a/my file.txt b/my file.txt",
    "new file mode 100644",
    "--- /dev/null",
    "+++ b/my file.txt",
    "@@ -0,0 +1 @@",
    "+--- not a header",
    "\\ No newline at end of file",
    "diff --git a/x.bin b/x.bin",
    "Binary files /dev/null and b/x.bin differ",
    "",
  ].join("\n");
  const files = parseDiff(text);
  assert.deepEqual(
    files.map((f) => [f.file, f.added, f.removed, f.binary]),
    [
      ["a.txt", 1, 1, false],
      ["my file.txt", 1, 0, false],
      ["x.bin", 0, 0, true],
    ],
  );
  assert.deepEqual(
    files[0].lines.map((l) => l.kind),
    ["meta", "meta", "meta", "meta", "hunk", "ctx", "del", "add"],
  );
  // Inside a hunk, a line starting with +++ is an added line, not a header.
  assert.equal(files[1].lines[5].kind, "add");
  assert.equal(parseDiff("").length, 0);
});
