import { test } from "node:test";
import assert from "node:assert/strict";
import { decode, encode, withCtrl } from "../src/term/bytes";

test("terminal data is base64 of UTF-8 bytes, both ways", () => {
  assert.equal(encode("ls\n"), "bHMK");
  assert.deepEqual(Array.from(decode(encode("é€"))), [0xc3, 0xa9, 0xe2, 0x82, 0xac]);
  // Bytes that are not UTF-8 survive decoding: a frame may end inside a character.
  assert.deepEqual(Array.from(decode("/w==")), [0xff]);
  const big = "x".repeat(100_000);
  assert.equal(decode(encode(big)).length, 100_000);
});

test("Ctrl turns the next key into its control character", () => {
  assert.equal(withCtrl("c"), "\x03");
  assert.equal(withCtrl("D"), "\x04");
  assert.equal(withCtrl("["), "\x1b");
  assert.equal(withCtrl("1"), "1");
  assert.equal(withCtrl("ab"), "ab");
});
