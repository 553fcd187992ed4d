// Files attached to the message being written: picked, pasted or dropped, uploaded at once one
// after another with a progress bar each, removable (an upload under way stops at its next
// chunk). The pickers' icons are CSS masks, not SVG in the DOM. Images show a local preview (a blob: URL, revoked when the file leaves the tray).
import { useEffect, useRef, useState } from "preact/hooks";
import { Cancelled, uploadFile } from "./upload";
import { humanSize, type Uploaded } from "./model";
import "./uploads.css";

export interface Attachment {
  key: number;
  name: string;
  size: number;
  sent: number;
  state: "waiting" | "sending" | "done" | "failed";
  error?: string;
  done?: Uploaded;
  preview?: string;
}

export interface Attachments {
  items: Attachment[];
  add: (files: File[]) => void;
  remove: (key: number) => void;
  clear: () => void;
  busy: boolean;
  failed: boolean;
  uploaded: Uploaded[];
}

let nextKey = 1;

export function useAttachments(): Attachments {
  const [items, setItems] = useState<Attachment[]>([]);
  const dropped = useRef(new Set<number>());
  const queue = useRef<Promise<void>>(Promise.resolve());
  const previews = useRef(new Map<number, string>());

  const patch = (key: number, p: Partial<Attachment>) =>
    setItems((list) => list.map((a) => (a.key === key ? { ...a, ...p } : a)));
  const forget = (key: number) => {
    dropped.current.add(key);
    const url = previews.current.get(key);
    if (url) URL.revokeObjectURL(url);
    previews.current.delete(key);
  };
  useEffect(() => () => [...previews.current.keys()].forEach(forget), []);

  const add = (files: File[]) => {
    const fresh = files.map((file) => {
      const key = nextKey++;
      let preview: string | undefined;
      if (file.type.startsWith("image/")) {
        preview = URL.createObjectURL(file);
        previews.current.set(key, preview);
      }
      const a: Attachment = { key, name: file.name || "file", size: file.size, sent: 0, state: "waiting", preview };
      queue.current = queue.current.then(async () => {
        if (dropped.current.has(key)) return;
        patch(key, { state: "sending" });
        try {
          const done = await uploadFile(
            file,
            (sent) => patch(key, { sent }),
            () => dropped.current.has(key),
          );
          patch(key, { state: "done", done, sent: file.size });
        } catch (e) {
          if (e instanceof Cancelled) return;
          patch(key, { state: "failed", error: e instanceof Error ? e.message : String(e) });
        }
      });
      return a;
    });
    setItems((list) => [...list, ...fresh]);
  };
  const remove = (key: number) => {
    forget(key);
    setItems((list) => list.filter((a) => a.key !== key));
  };
  const clear = () => {
    items.forEach((a) => forget(a.key));
    setItems([]);
  };
  return {
    items,
    add,
    remove,
    clear,
    busy: items.some((a) => a.state === "waiting" || a.state === "sending"),
    failed: items.some((a) => a.state === "failed"),
    uploaded: items.flatMap((a) => (a.done ? [a.done] : [])),
  };
}

// The two pickers: any files, and photos (on a phone, the camera or the library).
export function AttachButtons({ onFiles }: { onFiles: (files: File[]) => void }) {
  const take = (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const files = [...(input.files ?? [])];
    input.value = "";
    if (files.length) onFiles(files);
  };
  return (
    <div class="attach">
      <label class="attach-btn" title="Attach files">
        <input type="file" multiple class="sr-only" aria-label="Attach files" onChange={take} />
        <span class="attach-icon clip" aria-hidden="true" />
      </label>
      <label class="attach-btn" title="Add a photo">
        <input type="file" multiple accept="image/*" class="sr-only" aria-label="Add a photo" onChange={take} />
        <span class="attach-icon camera" aria-hidden="true" />
      </label>
    </div>
  );
}

export function Tray({ a }: { a: Attachments }) {
  if (!a.items.length) return null;
  return (
    <ul class="tray" aria-label="Attachments">
      {a.items.map((it) => (
        <li key={it.key} class={`att ${it.state}`}>
          {it.preview ? (
            <img class="att-thumb" src={it.preview} alt="" />
          ) : (
            <span class="att-thumb att-file" aria-hidden="true">
              {(it.name.split(".").pop() || "file").slice(0, 4)}
            </span>
          )}
          <span class="att-body">
            <span class="att-name" title={it.name}>
              {it.name}
            </span>
            {it.state === "failed" ? (
              <span class="att-error">Failed: {it.error}</span>
            ) : (
              <progress
                max={Math.max(it.size, 1)}
                value={it.state === "done" ? Math.max(it.size, 1) : it.sent}
                aria-label={`Upload of ${it.name}`}
              />
            )}
            <span class="att-size muted">
              {it.state === "done" ? humanSize(it.size) : it.state === "failed" ? "" : `${humanSize(it.sent)} of ${humanSize(it.size)}`}
            </span>
          </span>
          <button
            type="button"
            class="att-x"
            aria-label={`${it.state === "done" || it.state === "failed" ? "Remove" : "Cancel upload of"} ${it.name}`}
            onClick={() => a.remove(it.key)}
          >
            ×
          </button>
        </li>
      ))}
      <li class="sr-only" role="status" aria-live="polite">
        {a.busy ? "Uploading" : a.failed ? "An upload failed" : "Attachments ready"}
      </li>
    </ul>
  );
}
