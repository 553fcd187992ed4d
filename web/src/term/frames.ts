// Terminal frames as they arrive, kept per terminal until its view takes them: output can
// come before the view has mounted or xterm has loaded (term.js is fetched on demand).
import { store } from "../core/store";
import { decode } from "./bytes";

export interface TermSink {
  output(bytes: Uint8Array): void;
  exit(code: number | null): void;
}

type Event = { kind: "output"; bytes: Uint8Array } | { kind: "exit"; code: number | null };

/** What an unclaimed terminal may hold, so a terminal nobody shows cannot fill memory. */
const HELD_BYTES = 2 * 1024 * 1024;

const held = new Map<string, { events: Event[]; bytes: number }>();
const sinks = new Map<string, TermSink>();

function deliver(term: string, e: Event): void {
  const sink = sinks.get(term);
  if (sink) {
    if (e.kind === "output") sink.output(e.bytes);
    else sink.exit(e.code);
    return;
  }
  const h = held.get(term) ?? { events: [], bytes: 0 };
  if (e.kind === "output") {
    if (h.bytes + e.bytes.length > HELD_BYTES) return;
    h.bytes += e.bytes.length;
  }
  h.events.push(e);
  held.set(term, h);
}

store.onFrame((f) => {
  const a = f as Record<string, unknown>;
  if (typeof a.term !== "string") return;
  if (f.type === "term_output" && typeof a.data === "string") deliver(a.term, { kind: "output", bytes: decode(a.data) });
  else if (f.type === "term_exit") deliver(a.term, { kind: "exit", code: typeof a.code === "number" ? a.code : null });
});

/** Takes a terminal's frames: those held so far at once, then each as it comes. */
export function claim(term: string, sink: TermSink): () => void {
  sinks.set(term, sink);
  const h = held.get(term);
  held.delete(term);
  for (const e of h?.events ?? []) deliver(term, e);
  return () => {
    if (sinks.get(term) === sink) sinks.delete(term);
  };
}

/** Forgets what is held for a terminal no view will show. */
export function drop(term: string): void {
  held.delete(term);
}
