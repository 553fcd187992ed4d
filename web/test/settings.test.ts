// Settings helpers: QR drawing, the pairing countdown, push key decoding and push_test results.
import { test } from "node:test";
import assert from "node:assert/strict";
import qrcode from "qrcode-generator";
import { qrDataUrl, qrPath } from "../src/settings/qr";
import { countdown } from "../src/settings/time";
import { base64UrlBytes, describeResult } from "../src/settings/push";

/** Paints a path made of `M x y h w v1 h -w z` runs back into a grid. */
function paint(d: string, size: number): boolean[][] {
  const grid = Array.from({ length: size }, () => Array<boolean>(size).fill(false));
  for (const m of d.matchAll(/M(\d+) (\d+)h(\d+)v1h-(\d+)z/g)) {
    const [x, y, w, back] = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])];
    assert.equal(w, back);
    for (let i = 0; i < w; i++) grid[y]![x + i] = true;
  }
  return grid;
}

test("the QR path paints exactly the dark modules, offset by the margin", () => {
  const qr = qrcode(0, "M");
  qr.addData("http://192.168.1.5:7788/remote?pair=7KQ2MZ4D", "Byte");
  qr.make();
  const n = qr.getModuleCount();
  const grid = paint(qrPath(n, (r, c) => qr.isDark(r, c), 4), n + 8);
  for (let r = 0; r < n + 8; r++)
    for (let c = 0; c < n + 8; c++) {
      const inside = r >= 4 && c >= 4 && r < n + 4 && c < n + 4;
      assert.equal(grid[r]![c], inside ? qr.isDark(r - 4, c - 4) : false, `module ${r},${c}`);
    }
});

test("the QR data URL is an SVG that carries none of the encoded text", () => {
  const url = qrDataUrl('https://h/remote#pair=a"<script>.b.C');
  assert.ok(url.startsWith("data:image/svg+xml,"));
  const svg = decodeURIComponent(url.slice("data:image/svg+xml,".length));
  assert.ok(svg.startsWith("<svg "));
  assert.ok(!svg.includes("script") && !svg.includes("pair"));
  assert.match(svg, /^<svg [^>]*><rect [^>]*\/><path fill="#000" d="[Mhvz0-9 -]+"\/><\/svg>$/);
});

test("countdown shows m:ss and ends at expiry", () => {
  assert.equal(countdown(1_000_000 + 300_000, 1_000_000), "5:00");
  assert.equal(countdown(1_000_000 + 61_500, 1_000_000), "1:02");
  assert.equal(countdown(1_000_000 + 400, 1_000_000), "0:01");
  assert.equal(countdown(1_000_000, 1_000_000), null);
  assert.equal(countdown(999, 1_000_000), null);
  assert.equal(countdown(NaN, 1_000_000), null);
});

test("a base64url VAPID key decodes to its bytes, padded or not", () => {
  assert.deepEqual([...base64UrlBytes("AP8A_-8")], [0x00, 0xff, 0x00, 0xff, 0xef]);
  assert.deepEqual([...base64UrlBytes("AP8A_-8=")], [0x00, 0xff, 0x00, 0xff, 0xef]);
  assert.equal(base64UrlBytes("B".repeat(87)).length, 65);
});

test("push_test results read as sent, gone, or the relay's error", () => {
  assert.deepEqual(describeResult({ service: "fcm.googleapis.com", status: 201 }), { ok: true, text: "fcm.googleapis.com: sent (201)" });
  assert.equal(describeResult({ service: "fcm.googleapis.com", status: 410 }).ok, false);
  assert.match(describeResult({ service: "fcm.googleapis.com", status: 410 }).text, /gone/);
  assert.deepEqual(describeResult({ service: "x", error: "the relay is off: notifications go through the relay" }), {
    ok: false,
    text: "x: the relay is off: notifications go through the relay",
  });
  assert.match(describeResult({ service: "x" }).text, /no status/);
});

test("pairing failures read differently for a wrong code, too many attempts and no answer", async () => {
  const { PairError, pairErrorText } = await import("../src/core/auth");
  assert.match(pairErrorText(new PairError("wrong or expired pairing code", 403)), /wrong or has expired/);
  assert.match(pairErrorText(new PairError("too many wrong pairing codes; wait a minute", 429)), /Too many wrong codes/);
  assert.match(pairErrorText(new PairError("no answer", 0)), /did not answer/);
  assert.match(pairErrorText(new PairError("expected JSON", 400)), /Pairing failed: expected JSON/);
});
