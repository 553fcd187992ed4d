// How each transcript item looks. Everything here is hostile text: drawn as text, except the
// assistant's markdown, which goes through ui/markdown.tsx only.
import { Component } from "preact";
import { useEffect, useState } from "preact/hooks";
import { request } from "../core/daemon";
import { Markdown } from "../ui/markdown";
import { diffClass, looksLikeDiff, splitBlocks, type Item } from "./model";

/** Lines of tool output shown before "Show all". */
export const CLIP_LINES = 24;
const CLIP_CHARS = 6000;

export interface RowUi {
  /** Items whose default open/closed state the reader flipped. */
  flipped: Set<number>;
  /** Tool outputs shown whole. */
  whole: Set<number>;
  toggle(set: "flipped" | "whole", key: number): void;
}

function clip(text: string): { shown: string; lines: number; clipped: boolean } {
  const lines = text.split("\n");
  let shown = lines.length > CLIP_LINES ? lines.slice(0, CLIP_LINES).join("\n") : text;
  if (shown.length > CLIP_CHARS) shown = shown.slice(0, CLIP_CHARS);
  return { shown, lines: lines.length, clipped: shown.length < text.length };
}

export function DiffLines({ lines }: { lines: string[] }) {
  return (
    <pre class="diff">
      {lines.map((l, i) => (
        <span key={i} class={`dl ${diffClass(l)}`}>
          {l}
          {"\n"}
        </span>
      ))}
    </pre>
  );
}

const imageCache = new Map<string, Promise<string>>();
const SAFE_IMAGE = /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$/;

/** A message's image: the daemon reads the file (`fs_image`) and hands back a data URL. */
export function Thumb({ path }: { path: string }) {
  const [src, setSrc] = useState<string | null>(null);
  const [err, setErr] = useState<string | null>(null);
  useEffect(() => {
    let p = imageCache.get(path);
    if (!p) {
      p = request("fs_image", { path }).then((f) => {
        const data = String((f as Record<string, unknown>).data ?? "");
        if (!SAFE_IMAGE.test(data)) throw new Error("not an image");
        return data;
      });
      imageCache.set(path, p);
      p.catch(() => imageCache.delete(path));
    }
    let live = true;
    p.then(
      (d) => live && setSrc(d),
      (e: Error) => live && setErr(e.message),
    );
    return () => {
      live = false;
    };
  }, [path]);
  const name = path.split("/").pop() || path;
  if (src) return <img class="thumb" src={src} alt={`image ${name}`} title={path} />;
  return (
    <span class="thumb-missing" title={err ? `${path}: ${err}` : path}>
      image {name}
      {err ? " (cannot be shown)" : "…"}
    </span>
  );
}

function Toggle({ open, onClick, children, cls }: { open: boolean; onClick: () => void; children: preact.ComponentChildren; cls?: string }) {
  return (
    <button type="button" class={`fold ${cls ?? ""}`} aria-expanded={open} onClick={onClick}>
      <span class="chev" aria-hidden="true">
        {open ? "▾" : "▸"}
      </span>
      {children}
    </button>
  );
}

function AssistantText({ text, live }: { text: string; live: boolean }) {
  const blocks = splitBlocks(text);
  return (
    <div class={`assistant ${live ? "live" : ""}`}>
      {blocks.map((b, i) => (
        <Markdown key={i} text={b} />
      ))}
      {live && <span class="caret" aria-hidden="true" />}
    </div>
  );
}

export function renderItem(it: Item, ui: RowUi) {
  switch (it.k) {
    case "user":
      return (
        <div class="user">
          <div class="bubble">{it.text}</div>
          {it.images.length > 0 && (
            <div class="thumbs">
              {it.images.map((p) => (
                <Thumb key={p} path={p} />
              ))}
            </div>
          )}
        </div>
      );
    case "assistant":
      return <AssistantText text={it.text} live={it.live} />;
    case "reasoning": {
      const open = ui.flipped.has(it.key);
      return (
        <div class="reasoning">
          <Toggle open={open} onClick={() => ui.toggle("flipped", it.key)}>
            {it.live ? "Thinking…" : "Reasoning"}
          </Toggle>
          {open && <div class="reasoning-text">{it.text}</div>}
        </div>
      );
    }
    case "tool": {
      const open = !ui.flipped.has(it.key);
      const whole = ui.whole.has(it.key);
      const c = clip(it.output);
      const text = whole ? it.output : c.shown;
      const state = !it.done ? "running" : it.isError ? "failed" : "done";
      return (
        <div class={`tool ${state}`}>
          <Toggle open={open} onClick={() => ui.toggle("flipped", it.key)}>
            <span class="tool-name">{it.name || "tool"}</span> <span class={`badge ${state}`}>{state}</span>
          </Toggle>
          {open && it.output !== "" && (
            <div class="tool-out">
              {looksLikeDiff(text) ? <DiffLines lines={text.split("\n")} /> : <pre class="out">{text}</pre>}
              {c.clipped && (
                <button type="button" class="link" onClick={() => ui.toggle("whole", it.key)}>
                  {whole ? "Show less" : `Show all (${c.lines} lines)`}
                </button>
              )}
            </div>
          )}
        </div>
      );
    }
    case "notice":
      return <div class={`notice ${it.level}`}>{it.text}</div>;
    case "branch":
      return <div class="branch">{it.label}</div>;
  }
}

/** A row that redraws only when its item or its open state changed. */
export class Row extends Component<{ item: Item; ui: RowUi; flip: boolean; whole: boolean }> {
  shouldComponentUpdate(next: { item: Item; flip: boolean; whole: boolean }) {
    return next.item !== this.props.item || next.flip !== this.props.flip || next.whole !== this.props.whole;
  }
  render() {
    return renderItem(this.props.item, this.props.ui);
  }
}
