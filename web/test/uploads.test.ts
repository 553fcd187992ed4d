import { test } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { chunkRanges, humanSize, messageFields, readUploaded, toBase64 } from "../src/uploads/model";

test("chunks are base64 the daemon can read, for any size", () => {
  for (const n of [0, 1, 2, 3, 4, 0x8000, 0x8001, 100_000]) {
    const bytes = new Uint8Array(n).map((_, i) => (i * 7) % 256);
    assert.equal(toBase64(bytes), Buffer.from(bytes).toString("base64"), `${n} bytes`);
  }
});

test("a file is cut into ranges that cover it once; an empty file is one empty chunk", () => {
  assert.deepEqual(chunkRanges(0, 10), [[0, 0]]);
  assert.deepEqual(chunkRanges(10, 10), [[0, 10]]);
  assert.deepEqual(chunkRanges(25, 10), [[0, 10], [10, 20], [20, 25]]);
});

test("images go in images and other files as paths in the text", () => {
  const img = { upload: "u-1-1", path: "/h/.jucode/uploads/d/u-1-1-a.png", name: "a.png", size: 3, image: true };
  const doc = { upload: "u-1-2", path: "/h/.jucode/uploads/d/u-1-2-b.pdf", name: "b.pdf", size: 9, image: false };
  assert.deepEqual(messageFields("look", [img]), { content: "look", images: [img.path] });
  assert.deepEqual(messageFields("read this ", [doc]), { content: `read this\n\nAttached files:\n- ${doc.path}` });
  assert.deepEqual(messageFields("", [img, doc]), { content: `Attached files:\n- ${doc.path}`, images: [img.path] });
  assert.deepEqual(messageFields("", [img]), { content: "(image attached)", images: [img.path] });
  assert.deepEqual(messageFields("hi", []), { content: "hi" });
});

test("only an uploaded reply is taken as one", () => {
  assert.equal(readUploaded({ type: "uploaded", upload: "u-1", path: "/p/u-1-x.txt", name: "x.txt", size: 2, image: false }).name, "x.txt");
  assert.throws(() => readUploaded({ type: "upload_part", upload: "u-1", size: 2 }));
  assert.throws(() => readUploaded({ type: "uploaded", path: 5 }));
  assert.equal(humanSize(512), "512 B");
  assert.equal(humanSize(5 * 1024 * 1024), "5.0 MB");
});
