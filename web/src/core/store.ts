// The page's state: the daemon's lists as the latest broadcast had them, plus what each view
// keeps. One store, subscribed to by hooks; frames are applied in arrival order.
import { useEffect, useState } from "preact/hooks";
import type { ConnState, Frame } from "./conn";

export type Json = Record<string, any>;

export interface Lists {
  sessions: Json[];
  workspaces: Json[];
  workspacesRev: number;
  agents: Json[];
  schedules: Json[];
  questions: Json[];
  questionsClosed: Json[];
  actions: Json[];
  actionsClosed: Json[];
  dispatches: Json[];
  requirements: Json[];
}

export interface State extends Lists {
  conn: ConnState;
  version: string;
  /** `local` holds the daemon token (desktop powers); `device` and `relay` are paired. */
  access: "local" | "device" | "relay" | "none";
  /** Bumped when a report is posted or read, so the inbox reloads its list. */
  reportsRev: number;
  /** The daemon said `daemon_restarting` and has not greeted again since. */
  restarting: boolean;
}

const initial: State = {
  conn: { kind: "connecting", attempt: 0 },
  version: "",
  access: "none",
  reportsRev: 0,
  restarting: false,
  sessions: [],
  workspaces: [],
  workspacesRev: 0,
  agents: [],
  schedules: [],
  questions: [],
  questionsClosed: [],
  actions: [],
  actionsClosed: [],
  dispatches: [],
  requirements: [],
};

type Listener = () => void;
/** Receives every frame that carries `session` (the session view folds them). */
export type SessionSink = (f: Frame) => void;

class Store {
  state: State = initial;
  private listeners = new Set<Listener>();
  private sessionSinks = new Set<SessionSink>();
  private frameSinks = new Set<(f: Frame) => void>();

  set(patch: Partial<State>): void {
    this.state = { ...this.state, ...patch };
    for (const l of this.listeners) l();
  }

  subscribe(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  onSessionFrame(sink: SessionSink): () => void {
    this.sessionSinks.add(sink);
    return () => this.sessionSinks.delete(sink);
  }

  /** Every frame that is not a reply, for views that want more than the lists. */
  onFrame(sink: (f: Frame) => void): () => void {
    this.frameSinks.add(sink);
    return () => this.frameSinks.delete(sink);
  }

  apply(f: Frame): void {
    for (const s of this.frameSinks) s(f);
    const a = f as Json;
    switch (f.type) {
      case "hello":
        this.set({ version: String(a.version ?? ""), restarting: false });
        return;
      case "daemon_restarting":
        this.set({ restarting: true });
        return;
      case "sessions":
        if (Array.isArray(a.sessions)) this.set({ sessions: a.sessions });
        return;
      case "workspaces":
        if (Array.isArray(a.workspaces)) this.set({ workspaces: a.workspaces, workspacesRev: Number(a.rev ?? 0) });
        return;
      case "agents":
        if (Array.isArray(a.agents)) this.set({ agents: a.agents });
        return;
      case "schedules":
        if (Array.isArray(a.schedules)) this.set({ schedules: a.schedules });
        return;
      case "questions":
        if (Array.isArray(a.questions))
          this.set({ questions: a.questions, questionsClosed: Array.isArray(a.closed) ? a.closed : [] });
        return;
      case "actions":
        if (Array.isArray(a.actions))
          this.set({ actions: a.actions, actionsClosed: Array.isArray(a.closed) ? a.closed : [] });
        return;
      case "dispatches":
        if (Array.isArray(a.dispatches)) this.set({ dispatches: a.dispatches });
        return;
      case "requirements":
        if (Array.isArray(a.requirements)) this.set({ requirements: a.requirements });
        return;
      case "report_posted":
      case "report_read":
        this.set({ reportsRev: this.state.reportsRev + 1 });
        return;
    }
    if (typeof f.session === "string") for (const s of this.sessionSinks) s(f);
  }
}

export const store = new Store();

/** Re-renders the component when the selected part of the state changes. */
export function useStore<T>(select: (s: State) => T): T {
  const [value, setValue] = useState(() => select(store.state));
  useEffect(() => {
    const check = () => setValue(() => select(store.state));
    check();
    return store.subscribe(check);
  }, []);
  return value;
}
