// The page's one daemon connection, shared by every view: requests, and the watches to
// restore after a reconnect.
import { Connection, type Frame } from "./conn";
import type { Opener } from "./transport";
import { store } from "./store";

let conn: Connection | null = null;
const watched = new Set<string>();
const reopenHooks = new Set<() => void>();

export function startDaemon(opener: Opener): Connection {
  conn?.stop();
  conn = new Connection(opener, {
    frame: (f) => store.apply(f),
    state: (s) => store.set({ conn: s }),
    opened: () => {
      // A fresh connection knows nothing of ours: watch again (each watch brings a snapshot
      // whose `transcript` replaces what was drawn, so nothing doubles).
      for (const s of watched) conn?.post("watch", { session: s });
      for (const h of reopenHooks) h();
    },
  });
  conn.start();
  return conn;
}

export function connection(): Connection | null {
  return conn;
}

export function request(op: string, fields: Record<string, unknown> = {}): Promise<Frame> {
  if (!conn) return Promise.reject(new Error("not connected"));
  return conn.request(op, fields);
}

export function post(op: string, fields: Record<string, unknown> = {}): boolean {
  return conn?.post(op, fields) ?? false;
}

export function watch(session: string): void {
  watched.add(session);
  post("watch", { session });
}

export function unwatch(session: string): void {
  watched.delete(session);
  post("unwatch", { session });
}

/** Runs after every (re)connect, once the connect batch has begun arriving. */
export function onReopen(hook: () => void): () => void {
  reopenHooks.add(hook);
  return () => reopenHooks.delete(hook);
}
