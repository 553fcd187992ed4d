// Agents and their scheduled tasks: the list with a create form, and an agent's page (brief,
// settings, memory, sessions, tasks). Names, summaries, briefs and memory are the agent's own
// text: plain text, or markdown through ui/markdown.tsx; icons through icon.tsx.
import { useEffect, useRef, useState } from "preact/hooks";
import "./agents.css";
import { request } from "../core/daemon";
import { navigate } from "../core/route";
import { useStore, type Json } from "../core/store";
import { Markdown } from "../ui/markdown";
import { AgentIcon } from "./icon";
import { Schedules } from "./schedules";
import { ErrorLine, errText, useOp } from "../ui/op";

export { ErrorLine, useOp };

function projects(workspaces: Json[]): { id: string; label: string }[] {
  const out: { id: string; label: string }[] = [];
  for (const w of workspaces) for (const p of Array.isArray(w.projects) ? w.projects : []) out.push({ id: String(p.id), label: `${p.name ?? p.id} (${w.name ?? w.id})` });
  return out;
}

function slugify(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40);
}

function CreateAgent({ onDone }: { onDone: () => void }) {
  const workspaces = useStore((s) => s.workspaces);
  const [name, setName] = useState("");
  const [id, setId] = useState("");
  const [idTouched, setIdTouched] = useState(false);
  const [role, setRole] = useState("");
  const [project, setProject] = useState("");
  const [cwd, setCwd] = useState("");
  const [busy, err, run] = useOp();
  const projs = projects(workspaces);
  const agentId = idTouched ? id : slugify(name);
  return (
    <form
      class="agents-form"
      aria-label="New agent"
      onSubmit={(e) => {
        e.preventDefault();
        const fields: Json = { agent: agentId, name: name.trim(), role };
        if (project) fields.project = project;
        else fields.cwd = cwd.trim();
        void run(async () => {
          await request("agent_create", fields);
          onDone();
          navigate({ view: "agent", id: agentId });
        });
      }}
    >
      <label>
        Name
        <input value={name} required onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        Id
        <input
          value={agentId}
          pattern="[a-z0-9\-]{1,40}"
          required
          aria-describedby="agent-id-hint"
          onInput={(e) => {
            setIdTouched(true);
            setId((e.target as HTMLInputElement).value);
          }}
        />
        <span id="agent-id-hint" class="hint">
          1 to 40 of a–z, 0–9 and -
        </span>
      </label>
      <label>
        Role
        <textarea rows={4} value={role} placeholder="What this agent is for (markdown)" onInput={(e) => setRole((e.target as HTMLTextAreaElement).value)} />
      </label>
      {projs.length > 0 && (
        <label>
          Project
          <select value={project} onChange={(e) => setProject((e.target as HTMLSelectElement).value)}>
            <option value="">— a directory instead —</option>
            {projs.map((p) => (
              <option value={p.id}>{p.label}</option>
            ))}
          </select>
        </label>
      )}
      {!project && (
        <label>
          Working directory
          <input value={cwd} placeholder="~/work" required onInput={(e) => setCwd((e.target as HTMLInputElement).value)} />
        </label>
      )}
      <div class="agents-row">
        <button type="submit" disabled={busy}>
          Create agent
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      <ErrorLine text={err} />
    </form>
  );
}

function AgentState({ a }: { a: Json }) {
  const n = typeof a.sessions === "number" ? a.sessions : 0;
  return (
    <span class="meta">
      {a.busy ? <span class="agents-busy">running</span> : a.enabled === false ? "disabled" : "idle"} · {n} {n === 1 ? "session" : "sessions"}
    </span>
  );
}

export function AgentsView() {
  const agents = useStore((s) => s.agents);
  const [creating, setCreating] = useState(false);
  return (
    <section aria-labelledby="agents-h" class="agents">
      <div class="agents-head">
        <h1 id="agents-h">Agents</h1>
        {!creating && (
          <button class="primary" onClick={() => setCreating(true)}>
            New agent
          </button>
        )}
      </div>
      {creating && <CreateAgent onDone={() => setCreating(false)} />}
      {agents.length === 0 && !creating && <p class="empty">No agents yet.</p>}
      <ul class="list agents-list" data-testid="agents" aria-live="polite">
        {agents.map((a) => (
          <li key={a.id}>
            <a
              href={`/remote/agents/${encodeURIComponent(a.id)}`}
              onClick={(e) => {
                e.preventDefault();
                navigate({ view: "agent", id: a.id });
              }}
            >
              <AgentIcon agent={a} />
              <span class="agents-text">
                <span class="title">{String(a.name || a.id)}</span>
                {a.summary ? <span class="agents-summary">{String(a.summary)}</span> : null}
                <AgentState a={a} />
              </span>
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}

const MODES = ["manual", "auto-edit", "auto", "full-access"];
const SANDBOXES = ["read-only", "workspace-write", "full-access"];

interface SettingsValues {
  name: string;
  enabled: boolean;
  mode: string;
  sandbox: string;
  network: boolean;
  iconKind: string;
  iconValue: string;
  color: string;
  project: string;
}

function settingsOf(a: Json): SettingsValues {
  const icon = (a.icon ?? null) as Json | null;
  return {
    name: String(a.name ?? ""),
    enabled: a.enabled !== false,
    mode: String(a.approval_mode ?? "auto"),
    sandbox: String(a.sandbox ?? "workspace-write"),
    network: a.network !== false,
    iconKind: icon?.kind ?? "none",
    iconValue: icon?.kind === "svg" ? String(icon.markup ?? "") : icon?.kind === "slug" ? String(icon.value ?? "") : icon?.kind === "builtin" ? String(icon.id ?? "") : "",
    color: typeof a.color === "string" ? a.color : "",
    project: typeof a.project === "string" ? a.project : "",
  };
}

function Settings({ a }: { a: Json }) {
  const workspaces = useStore((s) => s.workspaces);
  const [v, setV] = useState(() => settingsOf(a));
  // Edits not yet saved are kept when the agents list is broadcast again (a turn starting,
  // another client's change); an untouched form follows the daemon's values.
  // A ref, not state: the effect runs after the paint, and an edit typed in between must be
  // seen by it (state captured at render time would still say "clean" and overwrite it).
  const dirty = useRef(false);
  const setDirty = (d: boolean) => {
    dirty.current = d;
  };
  const sig = JSON.stringify(settingsOf(a));
  useEffect(() => {
    if (!dirty.current) setV(settingsOf(a));
  }, [sig]);
  const edit = (patch: Partial<SettingsValues>) => {
    setDirty(true);
    setV((old) => ({ ...old, ...patch }));
  };
  const { name, enabled, mode, sandbox, network, iconKind, iconValue, color, project } = v;
  const setName = (x: string) => edit({ name: x });
  const setEnabled = (x: boolean) => edit({ enabled: x });
  const setMode = (x: string) => edit({ mode: x });
  const setSandbox = (x: string) => edit({ sandbox: x });
  const setNetwork = (x: boolean) => edit({ network: x });
  const setIconKind = (x: string) => edit({ iconKind: x });
  const setIconValue = (x: string) => edit({ iconValue: x });
  const setColor = (x: string) => edit({ color: x });
  const setProject = (x: string) => edit({ project: x });
  const [busy, err, run] = useOp();
  const [saved, setSaved] = useState(false);
  const projs = projects(workspaces);
  return (
    <form
      class="agents-form agents-card agents-settings"
      aria-labelledby="settings-h"
      onSubmit={(e) => {
        e.preventDefault();
        setSaved(false);
        const fields: Json = { agent: a.id, name: name.trim(), enabled, approval_mode: mode, sandbox, network, color: color || null, project: project || null };
        fields.icon =
          iconKind === "none" ? null : iconKind === "svg" ? { kind: "svg", markup: iconValue } : iconKind === "slug" ? { kind: "slug", value: iconValue } : { kind: "builtin", id: iconValue };
        void run(async () => {
          await request("agent_update", fields);
          setDirty(false);
          setSaved(true);
        });
      }}
    >
      <h2 id="settings-h">Settings</h2>
      <label>
        Name
        <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </label>
      <label class="agents-check">
        <input type="checkbox" checked={enabled} onChange={(e) => setEnabled((e.target as HTMLInputElement).checked)} />
        Enabled (takes messages and runs its tasks)
      </label>
      <label>
        Approval mode
        <select aria-label="Approval mode" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value)}>
          {MODES.map((m) => (
            <option value={m}>{m}</option>
          ))}
        </select>
      </label>
      <label>
        Sandbox
        <select aria-label="Sandbox" value={sandbox} onChange={(e) => setSandbox((e.target as HTMLSelectElement).value)}>
          {SANDBOXES.map((m) => (
            <option value={m}>{m}</option>
          ))}
        </select>
      </label>
      <label class="agents-check">
        <input type="checkbox" checked={network} onChange={(e) => setNetwork((e.target as HTMLInputElement).checked)} />
        Network for sandboxed commands
      </label>
      <label>
        Icon
        <select aria-label="Icon" value={iconKind} onChange={(e) => setIconKind((e.target as HTMLSelectElement).value)}>
          <option value="none">none (initial)</option>
          <option value="slug">emoji or short text</option>
          <option value="builtin">built-in id</option>
          <option value="svg">SVG markup</option>
        </select>
      </label>
      {iconKind !== "none" && (
        <label>
          {iconKind === "svg" ? "SVG markup (at most 8192 bytes)" : iconKind === "slug" ? "Emoji or text (at most 32 UTF-16 units)" : "Built-in icon id"}
          {iconKind === "svg" ? (
            <textarea rows={4} value={iconValue} onInput={(e) => setIconValue((e.target as HTMLTextAreaElement).value)} />
          ) : (
            <input value={iconValue} onInput={(e) => setIconValue((e.target as HTMLInputElement).value)} />
          )}
        </label>
      )}
      <div class="agents-row">
        <label class="agents-check">
          <input type="checkbox" checked={!!color} onChange={(e) => setColor((e.target as HTMLInputElement).checked ? "#2b6cb0" : "")} />
          Own colour
        </label>
        {color && (
          <label>
            <span class="sr-only">Colour</span>
            <input type="color" value={color} onInput={(e) => setColor((e.target as HTMLInputElement).value)} />
          </label>
        )}
      </div>
      <label>
        Project
        <select aria-label="Project" value={project} onChange={(e) => setProject((e.target as HTMLSelectElement).value)}>
          <option value="">none (stays in {String(a.cwd ?? "its directory")})</option>
          {projs.map((p) => (
            <option value={p.id}>{p.label}</option>
          ))}
        </select>
      </label>
      <div class="agents-row">
        <button type="submit" disabled={busy}>
          Save settings
        </button>
        <span role="status" class="meta">
          {saved ? "Saved." : ""}
        </span>
      </div>
      <ErrorLine text={err} />
    </form>
  );
}

function Brief({ a, brief }: { a: Json; brief: Json }) {
  const [role, setRole] = useState(String(brief["role.md"] ?? ""));
  const [editing, setEditing] = useState(false);
  const [busy, err, run] = useOp();
  return (
    <section aria-labelledby="brief-h" class="agents-card">
      <div class="agents-head">
        <h2 id="brief-h">Brief</h2>
        {!editing && <button onClick={() => setEditing(true)}>Edit role</button>}
      </div>
      {editing ? (
        <form
          class="agents-form"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              await request("agent_update", { agent: a.id, role });
              setEditing(false);
            });
          }}
        >
          <label>
            Role (role.md)
            <textarea rows={8} value={role} onInput={(e) => setRole((e.target as HTMLTextAreaElement).value)} />
          </label>
          <div class="agents-row">
            <button type="submit" disabled={busy}>
              Save role
            </button>
            <button type="button" onClick={() => setEditing(false)}>
              Cancel
            </button>
          </div>
          <ErrorLine text={err} />
        </form>
      ) : (
        <>
          <h3>Role</h3>
          {brief["role.md"] ? <Markdown text={String(brief["role.md"])} /> : <p class="empty">No role yet.</p>}
        </>
      )}
      {["capabilities.md", "policy.md", "state.md"].map((f) =>
        brief[f] ? (
          <details>
            <summary>{f} (the agent keeps it)</summary>
            <Markdown text={String(brief[f])} />
          </details>
        ) : null,
      )}
    </section>
  );
}

function Memory({ a, files }: { a: Json; files: string[] }) {
  const [open, setOpen] = useState<{ file: string; content: string } | null>(null);
  const [busy, err, run] = useOp();
  return (
    <section aria-labelledby="memory-h" class="agents-card">
      <h2 id="memory-h">Memory</h2>
      {files.length === 0 && <p class="empty">No memory files.</p>}
      <ul class="agents-chips">
        {files.map((f) => (
          <li>
            <button
              aria-pressed={open?.file === f}
              disabled={busy}
              onClick={() =>
                run(async () => {
                  const r = (await request("agent_memory_read", { agent: a.id, file: f })) as Json;
                  setOpen({ file: String(r.file), content: String(r.content ?? "") });
                })
              }
            >
              {f.replace(/^memory\//, "")}
            </button>
          </li>
        ))}
      </ul>
      <ErrorLine text={err} />
      {open && (
        <article class="agents-memory" aria-label={open.file}>
          <h3>{open.file}</h3>
          <Markdown text={open.content} />
        </article>
      )}
    </section>
  );
}

function Sessions({ a, sessions }: { a: Json; sessions: Json[] }) {
  const [busy, err, run] = useOp();
  return (
    <section aria-labelledby="asess-h" class="agents-card">
      <div class="agents-head">
        <h2 id="asess-h">Sessions</h2>
        <button
          class="primary"
          disabled={busy}
          onClick={() =>
            run(async () => {
              const r = (await request("session_create", { agent: a.id })) as Json;
              navigate({ view: "session", id: String(r.session) });
            })
          }
        >
          Start a session
        </button>
      </div>
      <ErrorLine text={err} />
      {sessions.length === 0 && <p class="empty">No sessions yet.</p>}
      <ul class="list">
        {sessions.map((s) => (
          <li key={s.session}>
            <a
              href={`/remote/s/${encodeURIComponent(s.session)}`}
              onClick={(e) => {
                e.preventDefault();
                navigate({ view: "session", id: s.session });
              }}
            >
              <span class="title">{String(s.title || s.session)}</span>
              <span class="meta">{s.busy ? "running" : s.open ? "open" : "closed"}</span>
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}

function DeleteAgent({ a }: { a: Json }) {
  const [armed, setArmed] = useState(false);
  const [busy, err, run] = useOp();
  return (
    <section aria-labelledby="del-h" class="agents-card agents-danger">
      <h2 id="del-h">Delete</h2>
      <p class="meta">Removes its brief, memory, settings and tasks. Its sessions stay.</p>
      {armed ? (
        <div class="agents-row">
          <button
            class="danger"
            disabled={busy}
            onClick={() =>
              run(async () => {
                await request("agent_delete", { agent: a.id });
                navigate({ view: "agents" });
              })
            }
          >
            Yes, delete {String(a.name || a.id)}
          </button>
          <button onClick={() => setArmed(false)}>Keep it</button>
        </div>
      ) : (
        <button onClick={() => setArmed(true)}>Delete agent…</button>
      )}
      <ErrorLine text={err} />
    </section>
  );
}

export function AgentView({ id }: { id: string }) {
  const listed = useStore((s) => s.agents.find((a) => a.id === id) ?? null);
  const conn = useStore((s) => s.conn.kind);
  const [got, setGot] = useState<Json | null>(null);
  const [err, setErr] = useState("");
  // agent_get again whenever the agents list changes (its entry, sessions or summary moved).
  useEffect(() => {
    if (conn !== "open") return;
    let live = true;
    request("agent_get", { agent: id }).then(
      (f) => live && (setGot(f as Json), setErr("")),
      (e) => live && setErr(errText(e)),
    );
    return () => {
      live = false;
    };
  }, [id, conn, listed]);
  const a = (got?.agent as Json | undefined) ?? listed;
  return (
    <section aria-labelledby="agent-h" class="agents agent-page">
      <p>
        <a
          href="/remote/agents"
          onClick={(e) => {
            e.preventDefault();
            navigate({ view: "agents" });
          }}
        >
          ← Agents
        </a>
      </p>
      {!a ? (
        <>
          <h1 id="agent-h">{id}</h1>
          {err ? <ErrorLine text={err} /> : <p class="empty">Loading…</p>}
        </>
      ) : (
        <>
          <header class="agent-hero">
            <AgentIcon agent={a} size={56} />
            <div>
              <h1 id="agent-h">{String(a.name || a.id)}</h1>
              <p class="meta">
                {String(a.id)} · {String(a.cwd ?? "")}
              </p>
              <AgentState a={a} />
            </div>
          </header>
          <div class="agent-grid">
            <div class="agent-col">
              {got && <Brief key={`b-${String(got.brief?.["role.md"] ?? "")}`} a={a} brief={(got.brief ?? {}) as Json} />}
              <Schedules agent={a} />
              {got && <Sessions a={a} sessions={Array.isArray(got.sessions) ? got.sessions : []} />}
            </div>
            <div class="agent-col">
              <Settings key={String(a.id)} a={a} />
              {got && <Memory a={a} files={Array.isArray(got.memory) ? got.memory.map(String) : []} />}
              <DeleteAgent a={a} />
            </div>
          </div>
        </>
      )}
    </section>
  );
}
