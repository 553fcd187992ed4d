// The terminal view: a shell on the daemon's computer in xterm, and the reusable pane that
// shows any terminal already opened (term_open here; session_tui for the TUI hand-off).
import { useEffect, useRef, useState } from "preact/hooks";
import { onReopen, post, request } from "../core/daemon";
import { navigate } from "../core/route";
import { useStore } from "../core/store";
import type { TermHandle, TermModule } from "./api";
import { claim, drop } from "./frames";
import { encode, withCtrl } from "./bytes";
import "./term.css";

let loading: Promise<TermModule> | null = null;

/** term.js and its stylesheet, fetched once, the first time a terminal opens. */
export function loadTerm(): Promise<TermModule> {
  if (!loading) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = "/remote/term.css";
    document.head.appendChild(link);
    // A path in a variable: the bundler leaves this import to the browser.
    const url = "/remote/term.js";
    loading = import(url) as Promise<TermModule>;
    loading.catch(() => {
      loading = null;
    });
  }
  return loading;
}

const KEYS: { label: string; name: string; seq: string }[] = [
  { label: "Esc", name: "Escape", seq: "\x1b" },
  { label: "Tab", name: "Tab", seq: "\t" },
  { label: "←", name: "Left", seq: "\x1b[D" },
  { label: "↑", name: "Up", seq: "\x1b[A" },
  { label: "↓", name: "Down", seq: "\x1b[B" },
  { label: "→", name: "Right", seq: "\x1b[C" },
];

type Ended = { code: number | null } | "dropped" | null;

/** Shows terminal `term` (already opened by this client) until it exits. */
export function TerminalPane({ term, label, onExit }: { term: string; label: string; onExit?: (code: number | null) => void }) {
  const box = useRef<HTMLDivElement>(null);
  const handle = useRef<TermHandle | null>(null);
  const ctrl = useRef(false);
  const [ctrlOn, setCtrlOn] = useState(false);
  const [ended, setEnded] = useState<Ended>(null);
  const [failed, setFailed] = useState("");

  const send = (data: string) => {
    if (ctrl.current) {
      data = withCtrl(data);
      ctrl.current = false;
      setCtrlOn(false);
    }
    post("term_input", { term, data: encode(data) });
  };

  useEffect(() => {
    let gone = false;
    const early: Uint8Array[] = [];
    const release = claim(term, {
      output: (bytes) => (handle.current ? handle.current.write(bytes) : early.push(bytes)),
      exit: (code) => {
        setEnded({ code });
        onExit?.(code);
      },
    });
    // Terminals belong to a connection: after a reconnect this one is gone on the daemon.
    const unhook = onReopen(() => setEnded((e) => e ?? "dropped"));
    let observer: ResizeObserver | null = null;
    const refit = () => handle.current?.fit();
    loadTerm().then(
      (mod) => {
        if (gone || !box.current) return;
        const h = mod.createTerminal(box.current, {
          onData: send,
          onResize: (cols, rows) => post("term_resize", { term, cols, rows }),
        });
        handle.current = h;
        for (const b of early.splice(0)) h.write(b);
        const { cols, rows } = h.fit();
        post("term_resize", { term, cols, rows });
        observer = new ResizeObserver(refit);
        observer.observe(box.current);
        h.focus();
      },
      (e: Error) => setFailed(`The terminal could not load: ${e.message}`),
    );
    addEventListener("orientationchange", refit);
    return () => {
      gone = true;
      release();
      drop(term);
      unhook();
      observer?.disconnect();
      removeEventListener("orientationchange", refit);
      handle.current?.dispose();
      handle.current = null;
    };
  }, [term]);

  return (
    <div class="term-pane">
      <div class="term-box" ref={box} role="application" aria-label={label} />
      {failed && <p class="notice error">{failed}</p>}
      <p class="term-state" role="status" aria-live="polite">
        {ended === "dropped"
          ? "The connection dropped, and the terminal ended with it (terminals cannot be reattached)."
          : ended
            ? ended.code === null
              ? "The shell was ended by a signal."
              : `The shell exited with code ${ended.code}.`
            : ""}
      </p>
      {!ended && (
        <div class="term-keys" role="toolbar" aria-label="Extra keys">
          <button
            type="button"
            aria-pressed={ctrlOn}
            aria-label="Control (applies to the next key)"
            onClick={() => {
              ctrl.current = !ctrl.current;
              setCtrlOn(ctrl.current);
              handle.current?.focus();
            }}
          >
            Ctrl
          </button>
          {KEYS.map((k) => (
            <button
              type="button"
              key={k.name}
              aria-label={k.name}
              onClick={() => {
                post("term_input", { term, data: encode(k.seq) });
                handle.current?.focus();
              }}
            >
              {k.label}
            </button>
          ))}
        </div>
      )}
    </div>
  );
}

/** `/remote/term/<cwd>`: opens a login shell in `cwd`; leaving the view closes it. */
export function TerminalView({ cwd }: { cwd: string }) {
  const open = useStore((s) => s.conn.kind === "open");
  const [term, setTerm] = useState<string | null>(null);
  const [err, setErr] = useState("");
  const [done, setDone] = useState(false);
  const opened = useRef<string | null>(null);
  const asked = useRef(false);
  const gone = useRef(false);
  useEffect(() => {
    void loadTerm().catch(() => {});
    return () => {
      gone.current = true;
      if (opened.current) post("term_close", { term: opened.current });
    };
  }, []);
  useEffect(() => {
    // Asked once the connection is up, and once only: a reconnect ends a terminal.
    if (!open || asked.current) return;
    asked.current = true;
    request("term_open", { cwd }).then(
      (r) => {
        opened.current = String(r.term);
        if (gone.current) post("term_close", { term: opened.current });
        else setTerm(opened.current);
      },
      (e: Error) => setErr(e.message),
    );
  }, [open]);
  const name = cwd.split("/").filter(Boolean).pop() ?? cwd;
  return (
    <section class="term-view" aria-labelledby="term-title">
      <header class="term-head">
        <a
          class="back"
          href="/remote"
          aria-label="Back to sessions"
          onClick={(e) => {
            e.preventDefault();
            navigate({ view: "sessions" });
          }}
        >
          ‹
        </a>
        <div class="term-title">
          <h1 id="term-title">Terminal · {name}</h1>
          <span class="muted cwd">{cwd}</span>
        </div>
        {term && !done && (
          <button type="button" onClick={() => post("term_close", { term })}>
            End
          </button>
        )}
      </header>
      {err && <p class="notice error" role="alert">{err}</p>}
      {!term && !err && <p class="muted">Opening a shell…</p>}
      {term && <TerminalPane term={term} label={`Terminal in ${cwd}`} onExit={() => setDone(true)} />}
      <p class="muted small">The shell runs on the computer as you. Leaving this view or losing the connection ends it.</p>
    </section>
  );
}
