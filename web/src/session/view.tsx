// One session's live view: the transcript (windowed), approval cards, the queue, the model
// line and the composer. Events are folded by model.ts and drawn at most once a frame.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { GatewaySwitch } from "./gateway";
import { onReopen, post, request, unwatch, watch } from "../core/daemon";
import { navigate } from "../core/route";
import { FilesLink } from "../files/link";
import { store, useStore, type Json } from "../core/store";
import { emptyState, reduce, type Approval, type Item, type SessionState } from "./model";
import { DiffLines, Row, type RowUi } from "./items";
import { VList } from "./vlist";
import { Composer } from "./composer";
import { messageFields, type Uploaded } from "../uploads/model";
import { TuiDock, hasTui, openTui, useSurface } from "../tui/tui";
import { SessionList, sessionTitle } from "../sessions/view";
import "./session.css";

const MODES = ["manual", "auto-edit", "auto", "full-access"];

function ApprovalCard({ session, a }: { session: string; a: Approval }) {
  const [chosen, setChosen] = useState<Set<string>>(() => new Set((a.hunks ?? []).map((h) => h.id)));
  const [sent, setSent] = useState(false);
  const hunks = a.hunks ?? [];
  const all = hunks.length === 0 || chosen.size === hunks.length;
  const answer = (decision: "allow" | "deny", always?: string | true) => {
    const fields: Record<string, unknown> = { session, call_id: a.callId, decision };
    if (always !== undefined) {
      fields.always = true;
      if (typeof always === "string") fields.always_scope = always;
    } else if (decision === "allow" && hunks.length > 0) fields.hunks = hunks.filter((h) => chosen.has(h.id)).map((h) => h.id);
    if (post("approve", fields)) setSent(true);
  };
  const titleId = `ap-${a.callId}`;
  return (
    <section class="approval" role="group" aria-labelledby={titleId} data-call={a.callId}>
      <h2 id={titleId}>
        Allow <span class="tool-name">{a.name || "this call"}</span>?
        {a.subagent && <span class="muted"> (subagent {a.subagent})</span>}
      </h2>
      {a.summary && <pre class="summary">{a.summary}</pre>}
      {hunks.length > 0 && (
        <fieldset class="hunks">
          <legend>Changes to apply</legend>
          {hunks.map((h) => (
            <div class="hunk-pick" key={h.id}>
              <label class="hunk-head">
                <input
                  type="checkbox"
                  aria-label={`Apply ${h.file} ${h.header}`}
                  checked={chosen.has(h.id)}
                  onChange={(e) => {
                    const next = new Set(chosen);
                    if (e.currentTarget.checked) next.add(h.id);
                    else next.delete(h.id);
                    setChosen(next);
                  }}
                />
                <span class="file">{h.file}</span> <span class="muted">{h.header}</span>
              </label>
              <DiffLines lines={h.lines} />
            </div>
          ))}
        </fieldset>
      )}
      <div class="actions">
        <button type="button" class="primary" disabled={sent || (hunks.length > 0 && chosen.size === 0)} onClick={() => answer("allow")}>
          {all ? "Allow" : `Allow ${chosen.size} of ${hunks.length}`}
        </button>
        <button type="button" class="danger" disabled={sent} onClick={() => answer("deny")}>
          Deny
        </button>
        {a.scopes.length > 0
          ? a.scopes.map((sc) => (
              <button type="button" key={sc} disabled={sent || !all} onClick={() => answer("allow", sc)}>
                Always allow ({sc})
              </button>
            ))
          : (
              <button type="button" disabled={sent || !all} onClick={() => answer("allow", true)} title="Allow this tool for the rest of the session">
                Always allow
              </button>
            )}
      </div>
      {sent && (
        <p class="muted" role="status">
          Answer sent…
        </p>
      )}
    </section>
  );
}

function ModelLine({ s, meta, inTui }: { s: SessionState; meta: Json | undefined; inTui: boolean }) {
  const m = s.model ?? {};
  const bits: string[] = [];
  if (m.model) bits.push(String(m.model));
  if (m.reasoning_effort) bits.push(`effort ${String(m.reasoning_effort)}`);
  if (m.state && m.state !== "ready") bits.push(String(m.state));
  if (s.contextTokens != null) bits.push(`${s.contextTokens.toLocaleString()} tokens`);
  // In the TUI the daemon's engine is stopped, yet the conversation is live over there.
  const state = inTui ? "in the TUI" : !meta?.open ? "closed" : s.approvals.length ? "waiting for you" : s.busy ? "working" : "idle";
  return (
    <div class="modelline">
      <span class={`state ${state.replace(/ /g, "-")}`} data-testid="session-state">
        {state}
      </span>
      {bits.length > 0 && <span class="muted"> · {bits.join(" · ")}</span>}
      {s.status && <span class="muted"> · {s.status}</span>}
      {s.modePending && <span class="muted"> · mode {s.modePending} after this turn</span>}
    </div>
  );
}

export function SessionView({ id }: { id: string }) {
  const meta = useStore((st) => st.sessions.find((x) => x.session === id));
  const [s, setS] = useState<SessionState>(emptyState);
  const cur = useRef<SessionState>(s);
  const [flipped, setFlipped] = useState<Set<number>>(() => new Set());
  const [whole, setWhole] = useState<Set<number>>(() => new Set());
  const [pinned, setPinned] = useState(true);
  const [err, setErr] = useState("");
  const control = useRef<{ toBottom?: () => void }>({});
  const [tuiTerm, setTuiTerm] = useState<string | null>(null);
  const inTui = useSurface(id).surface === "tui" || tuiTerm !== null;

  useEffect(() => {
    cur.current = emptyState();
    setS(cur.current);
    let raf = 0;
    const flush = () => {
      raf = 0;
      setS(cur.current);
    };
    const off = store.onSessionFrame((f) => {
      if (f.session !== id) return;
      const next = reduce(cur.current, f as Json);
      if (next === cur.current) return;
      cur.current = next;
      if (!raf) raf = requestAnimationFrame(flush);
    });
    // After a reconnect: a session that was running until the connection dropped and is
    // closed now (the daemon restarted; a stopping daemon closes its engines just before it
    // goes) is opened again, so the conversation goes on where it was.
    const find = () => store.state.sessions.find((x) => x.session === id);
    let wasOpen = find()?.open === true;
    let closedAt = 0;
    let connOpen = store.state.conn.kind === "open";
    let reopen = false;
    let listAtReopen: unknown = null;
    const offReopen = onReopen(() => {
      listAtReopen = store.state.sessions;
    });
    const offList = store.subscribe(() => {
      const st = store.state;
      const now = find();
      if (st.conn.kind === "open") {
        if (!connOpen) connOpen = true;
        if (listAtReopen !== null && st.sessions !== listAtReopen) {
          listAtReopen = null;
          if (reopen && now && !now.open) void openIt();
          reopen = false;
        }
        const open = now?.open === true;
        if (wasOpen && !open) closedAt = Date.now();
        wasOpen = open;
      } else if (connOpen) {
        connOpen = false;
        reopen = wasOpen || Date.now() - closedAt < 3000;
      }
    });
    watch(id);
    return () => {
      off();
      offReopen();
      offList();
      if (raf) cancelAnimationFrame(raf);
      unwatch(id);
    };
  }, [id]);

  const openIt = async (): Promise<boolean> => {
    setErr("");
    try {
      await request("session_open", { session: id });
      // The snapshot after a fresh watch holds the conversation, whether or not the engine
      // sends its own transcript.
      post("watch", { session: id });
      return true;
    } catch (e) {
      setErr((e as Error).message);
      return false;
    }
  };

  const ui: RowUi = useMemo(
    () => ({
      flipped,
      whole,
      toggle(which, key) {
        const upd = (prev: Set<number>) => {
          const next = new Set(prev);
          if (next.has(key)) next.delete(key);
          else next.add(key);
          return next;
        };
        if (which === "flipped") setFlipped(upd);
        else setWhole(upd);
      },
    }),
    [flipped, whole],
  );

  const send = async (text: string, files: Uploaded[] = []): Promise<boolean> => {
    if (!meta?.open && !(await openIt())) return false;
    const t = text.trim();
    if (t.startsWith("/") && !files.length) return post("command", { session: id, input: t });
    control.current.toBottom?.();
    if (files.length) return post("user_message", { session: id, ...messageFields(text, files) });
    return post("user_message", { session: id, content: text });
  };

  const title = meta ? sessionTitle(meta) : id;
  const modes = s.mode && !MODES.includes(s.mode) ? [...MODES, s.mode] : MODES;
  return (
    <div class="sv-wrap">
      <aside class="sv-side" aria-label="Sessions">
        <SessionList current={id} />
      </aside>
    <section class="sv" aria-labelledby="sv-title">
      <header class="sv-head">
        <a
          class="back"
          href="/remote"
          aria-label="All sessions"
          onClick={(e) => {
            e.preventDefault();
            navigate({ view: "sessions" });
          }}
        >
          ‹
        </a>
        <div class="sv-title">
          <h1 id="sv-title">{title}</h1>
          <ModelLine s={s} meta={meta} inTui={inTui} />
        </div>
        {meta && !meta.chat && typeof meta.cwd === "string" && <FilesLink path={meta.cwd} />}
        <label class="mode">
          <span class="sr-only">Approval mode</span>
          <select
            value={s.mode}
            disabled={!meta?.open}
            onChange={(e) => post("set_approval_mode", { session: id, mode: e.currentTarget.value })}
            aria-label="Approval mode"
          >
            {!s.mode && <option value="">mode…</option>}
            {modes.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
        {meta && !meta.chat && typeof meta.cwd === "string" && (
          <button type="button" aria-label="Open a terminal in this session's directory" onClick={() => navigate({ view: "terminal", cwd: String(meta.cwd) })}>
            Terminal
          </button>
        )}
        {hasTui(meta) && !inTui && (
          <button
            type="button"
            aria-label="Open this conversation in its engine's terminal interface"
            onClick={() =>
              openTui(id, s.busy).then(
                (term) => term && setTuiTerm(term),
                (e: Error) => setErr(e.message),
              )
            }
          >
            Open in terminal
          </button>
        )}
        {(meta?.engine === "claude" || meta?.engine === "codex") && <GatewaySwitch id={id} on={meta.gateway === true} />}
        {inTui ? null : meta?.open ? (
          <button type="button" onClick={() => post("session_close", { session: id })}>
            Close
          </button>
        ) : (
          <button type="button" class="primary" onClick={() => void openIt()}>
            Open
          </button>
        )}
      </header>
      {!meta && <p class="notice error">This session is not in the daemon's list (hidden, or unknown).</p>}
      {meta && !meta.open && !inTui && (
        <p class="notice info" data-testid="closed-note">
          This session is not running. Open it (or send a message) to continue.
        </p>
      )}
      {err && (
        <p class="notice error" role="alert">
          {err}
        </p>
      )}
      {s.items.length === 0 && meta?.open && <p class="empty sv-empty">No messages yet.</p>}
      <VList<Item>
        key={id}
        items={s.items}
        keyOf={(it) => it.key}
        label="Conversation"
        control={control.current}
        onPinned={setPinned}
        render={(it) => <Row item={it} ui={ui} flip={flipped.has(it.key)} whole={whole.has(it.key)} />}
      />
      {!pinned && (
        <button type="button" class="jump" onClick={() => control.current.toBottom?.()}>
          Jump to latest ↓
        </button>
      )}
      <div class="dock">
        {s.approvals.map((a) => (
          <ApprovalCard key={a.callId} session={id} a={a} />
        ))}
        {s.pending.length > 0 && (
          <div class="pending" aria-label="Queued messages">
            <span class="muted">Queued ({s.pending.length}):</span>
            <ol>
              {s.pending.map((p, i) => (
                <li key={i}>{p}</li>
              ))}
            </ol>
          </div>
        )}
      </div>
      <div class="sr-only" role="status" aria-live="polite">
        {s.approvals.length ? `Waiting for your answer: ${s.approvals[0]!.name}` : s.busy ? "Working" : "Ready"}
      </div>
      <TuiDock session={id} term={tuiTerm} onDone={() => setTuiTerm(null)} />
      {!inTui && <Composer
        key={id}
        commands={s.commands}
        busy={s.busy}
        canSteer={s.busy && s.pending.length > 0}
        onSend={send}
        onInterrupt={() => post("interrupt", { session: id })}
        onSteer={() => post("steer", { session: id })}
      />}
    </section>
    </div>
  );
}
