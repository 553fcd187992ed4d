// Sends one file to the daemon in chunks, each after the reply to the one before (as the
// protocol asks), reporting progress and stopping between chunks when cancelled.
import { request } from "../core/daemon";
import { CHUNK_BYTES, FILE_MAX_BYTES, chunkRanges, readUploaded, toBase64, type Uploaded } from "./model";

export class Cancelled extends Error {
  constructor() {
    super("cancelled");
  }
}

export async function uploadFile(
  file: Blob & { name?: string },
  onProgress: (sent: number) => void,
  cancelled: () => boolean,
): Promise<Uploaded> {
  if (file.size > FILE_MAX_BYTES) throw new Error("larger than 100 MB");
  let id: string | null = null;
  const ranges = chunkRanges(file.size, CHUNK_BYTES);
  for (let i = 0; i < ranges.length; i++) {
    if (cancelled()) throw new Cancelled();
    const [a, b] = ranges[i]!;
    const bytes = new Uint8Array(await file.slice(a, b).arrayBuffer());
    const last = i === ranges.length - 1;
    const fields: Record<string, unknown> = { data: toBase64(bytes), last };
    if (id === null) fields.name = file.name || "file";
    else {
      fields.upload = id;
      fields.offset = a;
    }
    const reply = (await request("upload", fields)) as Record<string, unknown>;
    onProgress(b);
    if (last) return readUploaded(reply);
    if (typeof reply.upload !== "string") throw new Error("the daemon did not start the upload");
    id = reply.upload;
  }
  throw new Error("nothing was sent");
}
