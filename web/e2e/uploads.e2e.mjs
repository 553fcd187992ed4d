// Attaching files and photos to a message, against the real daemon and the scripted engine:
// chunked uploads with progress, cancel between chunks, a refused name shown as a failure,
// images sent in user_message's images (and shown in the transcript through fs_image) and
// other files as paths in the text.
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { crc32, deflateSync } from "node:zlib";
import { DESKTOP, PHONE, assert, desk, eventually, newPage, shoot, startDaemon } from "./harness.mjs";

// A 96 × 64 gradient PNG, made here (zlib's deflate and CRC-32).
function gradientPng(w = 96, h = 64) {
  const rows = [];
  for (let y = 0; y < h; y++) {
    rows.push(0);
    for (let x = 0; x < w; x++) rows.push(Math.min(255, x * 2 + 60), Math.min(255, y * 3 + 40), 200 - x);
  }
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", deflateSync(Buffer.from(rows))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}
const PNG = gradientPng();

async function setup({ browser, home, cleanup }, device) {
  const daemon = await startDaemon(home);
  cleanup.push(() => daemon.stop());
  const d = await desk(daemon);
  cleanup.push(() => d.close());
  const dir = home.project("proj");
  const { session } = await d.request("session_create", { cwd: dir });
  const page = await newPage(browser, device);
  const sent = [];
  page.on("websocket", (ws) => ws.on("framesent", (f) => { try { sent.push(JSON.parse(String(f.payload))); } catch {} }));
  await page.goto(daemon.localLink(`/remote/s/${session}`));
  await page.locator('[data-testid="session-state"]', { hasText: "idle" }).waitFor();
  return { daemon, home, page, sent };
}

/** Every file under the daemon's uploads folder, relative. */
function uploaded(home) {
  const root = join(home.home, "uploads");
  if (!existsSync(root)) return [];
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? e.path, e.name).slice(root.length + 1))
    .sort();
}

const noProblems = (page) => assert(page.problems.length === 0, page.problems.join("\n"));

// 630,000 bytes of text: three chunks of 256 KiB.
const NOTES = Buffer.from("line of notes\n".repeat(45_000));

function attachAndSend(device, tag) {
  return async (ctx) => {
    const { home, page, sent } = await setup(ctx, device);
    await page.getByLabel("Add a photo").setInputFiles({ name: "shot.png", mimeType: "image/png", buffer: PNG });
    await page.getByLabel("Attach files").setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: NOTES });
    const tray = page.getByRole("list", { name: "Attachments" });
    await tray.getByText("shot.png").waitFor();
    // The local preview is a blob: URL, before anything is sent.
    const preview = await tray.locator("img.att-thumb").getAttribute("src");
    assert(preview?.startsWith("blob:"), `preview ${preview}`);
    await eventually(async () => (await tray.locator(".att.done").count()) === 2, "both uploads finish");
    await tray.getByText("615 KB").waitFor();
    await shoot(page, `uploads-composer-${tag}`);
    const chunks = sent.filter((f) => f.op === "upload");
    assert(chunks.length === 4, `one chunk for the photo, three for the notes: ${chunks.length}`);
    assert(chunks.filter((f) => f.upload).map((f) => f.offset).join() === "262144,524288", `offsets ${JSON.stringify(chunks.map((f) => f.offset))}`);
    await page.getByLabel("Message").fill("what is this?");
    await page.getByRole("button", { name: "Send" }).click();
    const msg = await eventually(() => sent.find((f) => f.op === "user_message"), "user_message sent");
    const files = uploaded(home);
    assert(files.length === 2 && files.every((f) => !f.endsWith(".part")), `files ${files}`);
    const png = files.find((f) => f.endsWith("-shot.png"));
    const txt = files.find((f) => f.endsWith("-notes.txt"));
    const root = join(home.home, "uploads");
    assert(readFileSync(join(root, png)).equals(PNG), "the photo arrived whole");
    assert(readFileSync(join(root, txt)).equals(NOTES), "the notes arrived whole");
    assert(JSON.stringify(msg.images) === JSON.stringify([join(root, png)]), `images ${JSON.stringify(msg.images)}`);
    assert(msg.content === `what is this?\n\nAttached files:\n- ${join(root, txt)}`, `content ${msg.content}`);
    // The tray empties; the transcript shows the message's image, read back with fs_image.
    await eventually(async () => (await page.getByRole("list", { name: "Attachments" }).count()) === 0, "the tray empties");
    await page.locator(".user img.thumb").waitFor();
    assert(sent.some((f) => f.op === "fs_image" && f.path === join(root, png)), "fs_image asked");
    await page.locator(".assistant", { hasText: "echo: what is this?" }).waitFor();
    await shoot(page, `uploads-sent-${tag}`);
    noProblems(page);
  };
}

export const scenarios = [
  { name: "a photo and a file attach with progress and go as an image and a path (desktop)", run: attachAndSend(DESKTOP, "desktop") },
  { name: "a photo and a file attach with progress and go as an image and a path (phone)", run: attachAndSend(PHONE, "phone") },
  {
    name: "cancel stops an upload between chunks; a refused name shows as a failure and blocks Send",
    async run(ctx) {
      const { home, page, sent } = await setup(ctx, PHONE);
      // 4 MB: sixteen chunks, far more than go out before the cancel.
      const big = Buffer.alloc(4 * 1024 * 1024, 7);
      await page.getByLabel("Attach files").setInputFiles({ name: "big.bin", mimeType: "application/octet-stream", buffer: big });
      await eventually(() => sent.some((f) => f.op === "upload" && f.name === "big.bin"), "the first chunk goes");
      await page.getByRole("button", { name: "Cancel upload of big.bin" }).click();
      await eventually(async () => (await page.getByRole("list", { name: "Attachments" }).count()) === 0, "the tray empties");
      // The chunk already on its way when the click landed may still be seen going out (the
      // recorder hears frames a little late); then no more follow.
      await page.waitForTimeout(300);
      const before = sent.filter((f) => f.op === "upload").length;
      await page.waitForTimeout(300);
      const after = sent.filter((f) => f.op === "upload").length;
      assert(after === before && after < 16, `no chunk after the cancel (${before} then ${after})`);
      assert(!sent.some((f) => f.op === "upload" && f.last === true), "the cancelled upload never ended");
      assert(uploaded(home).every((f) => f.endsWith(".part")), `only a part is left: ${uploaded(home)}`);

      await page.getByLabel("Attach files").setInputFiles({ name: "...", mimeType: "text/plain", buffer: Buffer.from("x") });
      const failed = page.locator(".att.failed");
      await failed.getByText("name has nothing left").waitFor();
      await page.getByLabel("Message").fill("with a failed file");
      assert(await page.getByRole("button", { name: "Send" }).isDisabled(), "Send waits while a failed file is in the tray");
      await shoot(page, "uploads-failed-phone");
      await page.getByRole("button", { name: "Remove ..." }).click();
      assert(await page.getByRole("button", { name: "Send" }).isEnabled(), "Send is back");
      noProblems(page);
    },
  },
];
