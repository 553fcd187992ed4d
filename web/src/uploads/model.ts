// What an upload needs without a DOM: chunking, base64, and how a message names what was
// uploaded (images in `images`, other files as paths at the end of the text).

// A chunk's size before base64. Small enough that a chunk, encoded and encrypted, stays far
// under the relay's 1 MiB frame limit; the daemon takes up to 4 MB from a local page.
export const CHUNK_BYTES = 256 * 1024;
// The daemon's limit for one file.
export const FILE_MAX_BYTES = 100 * 1024 * 1024;

export interface Uploaded {
  upload: string;
  path: string;
  name: string;
  size: number;
  image: boolean;
}

// Base64 (standard alphabet, padded) of bytes, in slices so a large chunk does not overflow
// the argument list of String.fromCharCode.
export function toBase64(bytes: Uint8Array): string {
  let bin = "";
  const STEP = 0x8000;
  for (let i = 0; i < bytes.length; i += STEP) {
    bin += String.fromCharCode(...bytes.subarray(i, i + STEP));
  }
  return btoa(bin);
}

// The [start, end) ranges a file of `size` bytes is sent in; an empty file is one empty chunk.
export function chunkRanges(size: number, chunk = CHUNK_BYTES): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let at = 0; at < size; at += chunk) out.push([at, Math.min(size, at + chunk)]);
  if (out.length === 0) out.push([0, 0]);
  return out;
}

// Reads an `uploaded` reply, refusing anything that is not one.
export function readUploaded(f: Record<string, unknown>): Uploaded {
  if (f.type !== "uploaded" || typeof f.path !== "string" || typeof f.upload !== "string") {
    throw new Error("the daemon did not confirm the upload");
  }
  return {
    upload: f.upload,
    path: f.path,
    name: typeof f.name === "string" ? f.name : f.path.split("/").pop() || f.path,
    size: typeof f.size === "number" ? f.size : 0,
    image: f.image === true,
  };
}

// The user_message fields for `text` with these files attached.
export function messageFields(text: string, files: Uploaded[]): { content: string; images?: string[] } {
  const images = files.filter((f) => f.image).map((f) => f.path);
  const others = files.filter((f) => !f.image).map((f) => f.path);
  let content = text.trim();
  if (others.length) {
    const list = others.map((p) => `- ${p}`).join("\n");
    content = `${content}${content ? "\n\n" : ""}Attached files:\n${list}`;
  }
  if (!content && images.length) content = images.length === 1 ? "(image attached)" : "(images attached)";
  return images.length ? { content, images } : { content };
}

// A short size for people: 12 KB, 3.4 MB.
export function humanSize(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${Math.round(n / 1024)} KB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}
