// The TUI hand-off on the page: "Open in terminal" moves a session's conversation into its
// engine's own terminal interface (`session_tui`), shown here in the terminal pane; every
// client shows a banner and no composer while a session's `surface` is `tui`.
import { useEffect, useRef, useState } from "preact/hooks";
import { post, request } from "../core/daemon";
import { store } from "../core/store";
import { TerminalPane } from "../term/view";
import "./tui.css";

type Json = Record<string, unknown>;

export interface Surface {
  surface: "tui" | "gui";
  term?: string;
}

/** The last `surface` of each session, from every client's broadcasts. */
const surfaces = new Map<string, Surface>();
const listeners = new Set<() => void>();

store.onFrame((f) => {
  const a = f as Json;
  if (a.type !== "surface" || typeof a.session !== "string") return;
  surfaces.set(a.session, {
    surface: a.surface === "tui" ? "tui" : "gui",
    term: typeof a.term === "string" ? a.term : undefined,
  });
  for (const l of listeners) l();
});

/** Re-renders when the session's surface changes. */
export function useSurface(session: string): Surface {
  const [s, setS] = useState<Surface>(() => surfaces.get(session) ?? { surface: "gui" });
  useEffect(() => {
    const check = () => setS(surfaces.get(session) ?? { surface: "gui" });
    check();
    listeners.add(check);
    return () => {
      listeners.delete(check);
    };
  }, [session]);
  return s;
}

/** The engines whose conversations have a TUI of their own. */
export function hasTui(meta: Json | undefined): boolean {
  if (!meta || meta.agent) return false;
  return meta.engine === "jucode" || meta.engine === "claude" || meta.engine === "codex";
}

/** Asks for the TUI; a running turn is stopped only once the user agrees. Returns the term. */
export async function openTui(session: string, busy: boolean): Promise<string | null> {
  if (busy && !confirm("A turn is running. Stop it and open the conversation in its terminal interface?")) return null;
  const r = await request("session_tui", { session, force: busy });
  return String(r.term);
}

/**
 * In place of the composer while the conversation is in its TUI: the terminal for the client
 * that opened it, a banner for the others.
 */
export function TuiDock({ session, term, onDone }: { session: string; term: string | null; onDone: () => void }) {
  const surface = useSurface(session);
  const was = useRef(surface.surface);
  useEffect(() => {
    // Back in the daemon: watch again for the restarted engine's events and snapshot.
    if (was.current === "tui" && surface.surface === "gui") {
      post("watch", { session });
      onDone();
    }
    was.current = surface.surface;
  }, [surface.surface]);
  if (term) {
    return (
      <div class="tui-dock" data-testid="tui-terminal">
        <p class="tui-note" role="status">
          In its terminal interface. Quit it there to come back to the chat.
        </p>
        <TerminalPane term={term} label="Conversation in its terminal interface" />
      </div>
    );
  }
  if (surface.surface === "tui") {
    return (
      <p class="tui-banner" role="status" data-testid="tui-banner">
        This conversation is open in its terminal interface on another screen. The chat is read-only until it is closed there.
      </p>
    );
  }
  return null;
}
