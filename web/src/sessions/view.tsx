// The session list: every hosted session, newest first, with its engine, its state (running,
// waiting for an approval or a deferred action, closed) and when it was last used; archive,
// hide, group, rename, open and close; and the form that creates a session.
import { useEffect, useState } from "preact/hooks";
import { post, request } from "../core/daemon";
import { navigate } from "../core/route";
import { store, useStore, type Json } from "../core/store";
import { GatewayChoice } from "./gateway-choice";
import "./sessions.css";

export function sessionTitle(s: Json): string {
  if (typeof s.title === "string" && s.title) return s.title;
  if (s.chat) return "New chat";
  return ( (typeof s.cwd === "string" && s.cwd.split("/").pop()) || String(s.session));
}

/** A group as the list shows it: a string, or an object's `name`; anything else is none. */
export function groupName(g: unknown): string {
  if (typeof g === "string") return g;
  if (g && typeof g === "object" && typeof (g as Json).name === "string") return (g as Json).name;
  return "";
}

// Approvals waiting, by session, from the session events every client receives. A session
// that was already waiting when the page connected shows as waiting once it is watched.
const waiting = new Map<string, Set<string>>();
const waitListeners = new Set<() => void>();
store.onSessionFrame((f) => {
  const s = f.session!;
  const set = waiting.get(s);
  const call = typeof f.call_id === "string" ? f.call_id : "";
  let changed = false;
  if (f.type === "approval_request" && call) {
    if (!set) waiting.set(s, new Set([call]));
    else set.add(call);
    changed = true;
  } else if (set && (f.type === "tool_start" || f.type === "tool_output" || f.type === "action_deferred") && set.delete(call)) {
    changed = true;
  } else if (set && (f.type === "session_closed" || f.type === "transcript" || (f.type === "status" && (f.message === "ready" || f.message === "interrupted")))) {
    waiting.delete(s);
    changed = true;
  }
  if (changed) for (const l of waitListeners) l();
});

function useWaiting(): Map<string, Set<string>> {
  const [, tick] = useState(0);
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    waitListeners.add(l);
    return () => waitListeners.delete(l);
  }, []);
  return waiting;
}

export function ago(ms: number, now = Date.now()): string {
  const d = Math.max(0, now - ms) / 1000;
  if (d < 45) return "just now";
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400) return `${Math.round(d / 3600)} h ago`;
  if (d < 86400 * 7) return `${Math.round(d / 86400)} d ago`;
  return new Date(ms).toLocaleDateString();
}

function projects(workspaces: Json[]): { path: string; label: string }[] {
  const out: { path: string; label: string }[] = [];
  for (const w of workspaces)
    for (const p of Array.isArray(w.projects) ? w.projects : [])
      if (typeof p?.path === "string") out.push({ path: p.path, label: `${String(p.name ?? p.path)} · ${String(w.name ?? "")}` });
  return out;
}

function NewSession({ onDone }: { onDone: () => void }) {
  const workspaces = useStore((s) => s.workspaces);
  const access = useStore((s) => s.access);
  const list = projects(workspaces);
  const [kind, setKind] = useState<"project" | "chat">(list.length || access === "local" ? "project" : "chat");
  const [cwd, setCwd] = useState(list[0]?.path ?? "");
  const [engine, setEngine] = useState("jucode");
  const [gateway, setGateway] = useState<Json>({});
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const engines = access === "local" ? ["jucode", "claude", "codex", "acp"] : ["jucode", "claude", "codex"];
  return (
    <form
      class="new-session"
      aria-label="New session"
      onSubmit={async (e) => {
        e.preventDefault();
        setErr("");
        setBusy(true);
        try {
          const fields: Json = { engine };
          if (Object.keys(gateway).length) fields.options = gateway;
          if (kind === "chat") fields.chat = true;
          else fields.cwd = cwd.trim();
          const r = await request("session_create", fields);
          onDone();
          navigate({ view: "session", id: String(r.session) });
        } catch (x) {
          setErr((x as Error).message);
        } finally {
          setBusy(false);
        }
      }}
    >
      <fieldset class="kind">
        <legend>Where</legend>
        <label>
          <input type="radio" name="kind" checked={kind === "project"} onChange={() => setKind("project")} /> In a project
        </label>
        <label>
          <input type="radio" name="kind" checked={kind === "chat"} onChange={() => setKind("chat")} /> A chat
        </label>
      </fieldset>
      {kind === "project" && list.length > 0 && (
        <label>
          <span id="ns-project">Project</span>
          <select aria-labelledby="ns-project" value={list.some((p) => p.path === cwd) ? cwd : ""} onChange={(e) => setCwd(e.currentTarget.value)}>
            {!list.some((p) => p.path === cwd) && <option value="">(typed path)</option>}
            {list.map((p) => (
              <option key={p.path} value={p.path}>
                {p.label}
              </option>
            ))}
          </select>
        </label>
      )}
      {kind === "project" && access === "local" && (
        <label>
          <span id="ns-dir">Directory</span>
          <input aria-labelledby="ns-dir" type="text" value={cwd} placeholder="/home/you/project or ~/project" onInput={(e) => setCwd(e.currentTarget.value)} spellcheck={false} />
        </label>
      )}
      {kind === "project" && list.length === 0 && access !== "local" && <p class="muted">No projects yet: add one on the computer, or start a chat.</p>}
      <label>
        <span id="ns-engine">Engine</span>
        <select aria-labelledby="ns-engine" value={engine} onChange={(e) => setEngine(e.currentTarget.value)}>
          {engines.map((x) => (
            <option key={x} value={x}>
              {x}
            </option>
          ))}
        </select>
      </label>
      <GatewayChoice engine={engine} onChange={setGateway} />
      <div class="row">
        <button type="submit" disabled={busy || (kind === "project" && !cwd.trim())}>
          Create
        </button>
        {kind === "project" && (
          <button type="button" disabled={!cwd.trim()} onClick={() => navigate({ view: "terminal", cwd: cwd.trim() })}>
            Open a terminal
          </button>
        )}
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      {err && (
        <p class="notice error" role="alert">
          {err}
        </p>
      )}
    </form>
  );
}

function Menu({ s, onError }: { s: Json; onError: (m: string) => void }) {
  const [mode, setMode] = useState<"" | "title" | "group">("");
  const [text, setText] = useState("");
  const meta = (fields: Json) => post("session_meta", { session: s.session, ...fields });
  const name = sessionTitle(s);
  if (mode)
    return (
      <form
        class="inline-edit"
        onSubmit={(e) => {
          e.preventDefault();
          if (mode === "title") meta({ title: text.trim() });
          else meta({ group: text.trim() ? text.trim() : null });
          setMode("");
        }}
      >
        <label>
          <span class="sr-only">{mode === "title" ? `New title for ${name}` : `Group of ${name}`}</span>
          <input type="text" value={text} onInput={(e) => setText(e.currentTarget.value)} placeholder={mode === "title" ? "Title (empty: automatic)" : "Group (empty: none)"} autoFocus />
        </label>
        <button type="submit">Save</button>
        <button type="button" onClick={() => setMode("")}>
          Cancel
        </button>
      </form>
    );
  return (
    <details class="menu">
      <summary aria-label={`Actions for ${name}`}>⋯</summary>
      <div
        class="menu-items"
        onClick={(e) => {
          // An action was picked: fold the menu.
          if ((e.target as HTMLElement).closest("button")) (e.currentTarget.parentElement as HTMLDetailsElement).open = false;
        }}
      >
        {s.open ? (
          <button type="button" onClick={() => post("session_close", { session: s.session })}>
            Close
          </button>
        ) : (
          <button type="button" onClick={() => request("session_open", { session: s.session }).catch((e: Error) => onError(e.message))}>
            Open
          </button>
        )}
        <button
          type="button"
          onClick={() => {
            setText(typeof s.title === "string" ? s.title : "");
            setMode("title");
          }}
        >
          Rename
        </button>
        <button
          type="button"
          onClick={() => {
            setText(groupName(s.group));
            setMode("group");
          }}
        >
          Group…
        </button>
        <button type="button" onClick={() => meta({ archived: !s.archived })}>
          {s.archived ? "Unarchive" : "Archive"}
        </button>
        <button type="button" onClick={() => meta({ hidden: true })}>
          Hide
        </button>
      </div>
    </details>
  );
}

function SessionRow({ s, waits, actions, current }: { s: Json; waits: number; actions: number; current: boolean }) {
  const [err, setErr] = useState("");
  const state = waits > 0 ? "waiting" : s.busy ? "running" : s.open ? "idle" : "closed";
  const label = waits > 0 ? "waiting for approval" : state;
  return (
    <li class={`srow ${current ? "current" : ""}`} data-session={s.session}>
      <a
        class="srow-main"
        href={`/remote/s/${encodeURIComponent(s.session)}`}
        aria-current={current ? "page" : undefined}
        onClick={(e) => {
          e.preventDefault();
          navigate({ view: "session", id: s.session });
        }}
      >
        <span class="title">{sessionTitle(s)}</span>
        <span class="meta">
          <span class={`dot ${state}`} aria-hidden="true" />
          <span class="state-label">{label}</span>
          {actions > 0 && <span class="pill">{actions} to decide</span>}
          <span> · {String(s.engine ?? "jucode")}</span>
          {s.chat && <span> · chat</span>}
          {typeof s.updated_at === "number" && (
            <span>
              {" "}
              · <time dateTime={new Date(s.updated_at).toISOString()}>{ago(s.updated_at)}</time>
            </span>
          )}
        </span>
        {!s.chat && typeof s.cwd === "string" && <span class="cwd">{s.cwd}</span>}
      </a>
      <Menu s={s} onError={setErr} />
      {err && (
        <p class="notice error" role="alert">
          {err}
        </p>
      )}
    </li>
  );
}

export function SessionList({ current }: { current?: string }) {
  const sessions = useStore((s) => s.sessions);
  const actions = useStore((s) => s.actions);
  const waits = useWaiting();
  const [tab, setTab] = useState<"active" | "archived">("active");
  const [creating, setCreating] = useState(false);
  const [, tick] = useState(0);
  useEffect(() => {
    const t = setInterval(() => tick((n) => n + 1), 30_000);
    return () => clearInterval(t);
  }, []);
  const shown = sessions
    .filter((s) => !s.hidden && !!s.archived === (tab === "archived"))
    .sort((a, b) => (b.updated_at ?? 0) - (a.updated_at ?? 0));
  const groups = new Map<string, Json[]>();
  for (const s of shown) {
    const g = groupName(s.group);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g)!.push(s);
  }
  const order = [...groups.keys()].sort((a, b) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b)));
  const actionsBy = new Map<string, number>();
  for (const a of actions) actionsBy.set(a.session_id, (actionsBy.get(a.session_id) ?? 0) + 1);
  const archivedCount = sessions.filter((s) => s.archived && !s.hidden).length;
  return (
    <div class={`slist ${current ? "side" : ""}`}>
      <div class="slist-head">
        {current ? <h2 class="side-h">Sessions</h2> : <h1 id="sessions-h">Sessions</h1>}
        <button type="button" class="primary" aria-expanded={creating} onClick={() => setCreating(!creating)}>
          New session
        </button>
      </div>
      {creating && <NewSession onDone={() => setCreating(false)} />}
      <div class="tabs" role="tablist" aria-label="Which sessions">
        <button type="button" role="tab" aria-selected={tab === "active"} onClick={() => setTab("active")}>
          Active
        </button>
        <button type="button" role="tab" aria-selected={tab === "archived"} onClick={() => setTab("archived")}>
          Archived{archivedCount ? ` (${archivedCount})` : ""}
        </button>
      </div>
      {shown.length === 0 && <p class="empty">{tab === "archived" ? "Nothing archived." : "No sessions yet."}</p>}
      {order.map((g) => (
        <section key={g} class="sgroup" aria-label={g ? `Group ${g}` : "Sessions"}>
          {g && <h2 class="gname">{g}</h2>}
          <ul class="list" data-testid="sessions">
            {groups.get(g)!.map((s) => (
              <SessionRow key={s.session} s={s} waits={waits.get(s.session)?.size ?? 0} actions={actionsBy.get(s.session) ?? 0} current={s.session === current} />
            ))}
          </ul>
        </section>
      ))}
    </div>
  );
}

export function SessionsView() {
  return (
    <section aria-labelledby="sessions-h">
      <SessionList />
    </section>
  );
}
