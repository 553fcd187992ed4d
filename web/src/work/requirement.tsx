// One requirement: its words and screenshots, the start gate (confirm the session's
// understanding, then its plan), an agent's proposal to decide, the progress its sessions
// recorded, the sessions on it, and replying or starting a session. The last reply and the
// progress come from a model: the reply through the sanitising markdown renderer, the rest as
// text.
import { useEffect, useState } from "preact/hooks";
import { request } from "../core/daemon";
import { navigate } from "../core/route";
import { useStore, type Json } from "../core/store";
import { Markdown } from "../ui/markdown";
import { when } from "../inbox/view";
import {
  WORK_MODES,
  gateLang,
  gateStep,
  modeLabel,
  progressParts,
  proposalText,
  requirementTitle,
  safeImageUrl,
} from "./model";
import { ErrorLine, ProjectSelect, StatusBadge, useOp } from "./ui";

const lang = () => gateLang(navigator.languages?.length ? navigator.languages : [navigator.language ?? "en"]);

function SessionLink({ id, label }: { id: string; label?: string }) {
  return (
    <a
      href={`/remote/s/${encodeURIComponent(id)}`}
      onClick={(e) => {
        e.preventDefault();
        navigate({ view: "session", id });
      }}
    >
      {label ?? `session ${id.slice(0, 8)}`}
    </a>
  );
}

/** The screenshots, fetched one by one as data URLs (`requirement_image`). */
function Images({ r }: { r: Json }) {
  const count = Array.isArray(r.images) ? r.images.length : 0;
  const [urls, setUrls] = useState<(string | null)[]>([]);
  useEffect(() => {
    let live = true;
    setUrls([]);
    void (async () => {
      for (let i = 0; i < count; i++) {
        const f = await request("requirement_image", { requirement: r.id, index: i }).catch(() => null);
        if (!live) return;
        const url = safeImageUrl(f?.data);
        setUrls((u) => {
          const next = [...u];
          next[i] = url;
          return next;
        });
      }
    })();
    return () => {
      live = false;
    };
  }, [r.id, count]);
  if (!count) return null;
  return (
    <ul class="wimages" aria-label="Screenshots">
      {Array.from({ length: count }, (_, i) => (
        <li key={i}>{urls[i] ? <img src={urls[i]!} alt={`Screenshot ${i + 1}`} /> : <span class="muted">Screenshot {i + 1}</span>}</li>
      ))}
    </ul>
  );
}

function Gate({ r }: { r: Json }) {
  const gate = r.gate as Json;
  const step = gateStep(gate);
  const [text, setText] = useState("");
  const [busy, err, run] = useOp();
  const ready = r.status === "confirm";
  const session = typeof gate.session === "string" ? gate.session : "";
  return (
    <section class="wcard wgate" aria-labelledby="wg-head">
      <h2 id="wg-head">Start gate</h2>
      <p>
        {step.doing}
        {session ? (
          <>
            {" "}
            in <SessionLink id={session} />
          </>
        ) : null}
        . Then it works in: <strong>{modeLabel(gate.mode)}</strong>.
      </p>
      {ready && r.last_reply ? <Markdown class="wreply" text={String(r.last_reply)} /> : null}
      {ready ? (
        <form
          class="wform"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              const fields: Json = { requirement: r.id, lang: lang() };
              if (text.trim()) fields.text = text.trim();
              await request("requirement_confirm", fields);
              setText("");
            });
          }}
        >
          <label for="wg-text">Anything to add (optional)</label>
          <textarea id="wg-text" rows={2} value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <div class="row">
            <button type="submit" class="primary" disabled={busy}>
              {step.confirm}
            </button>
          </div>
          <p class="muted">To have it revise instead, reply in the session.</p>
        </form>
      ) : (
        <p class="muted" role="status">
          {r.status === "approval" ? "The session waits for an approval." : "The session is working on it; confirm once it has answered."}
        </p>
      )}
      <ErrorLine text={err} />
    </section>
  );
}

function Proposal({ r }: { r: Json }) {
  const p = r.proposal as Json;
  const [busy, err, run] = useOp();
  const decide = (accept: boolean) =>
    run(async () => {
      await request("requirement_proposal", { requirement: r.id, accept });
      if (!accept && p.kind === "create") navigate({ view: "work" });
    });
  return (
    <section class="wcard wproposal" aria-labelledby="wp-head">
      <h2 id="wp-head">Proposal</h2>
      <p>{proposalText(p)}</p>
      {p.reason ? <p class="wquote">{String(p.reason)}</p> : null}
      <p class="meta">
        {typeof p.session === "string" && p.session ? <SessionLink id={p.session} /> : null} {when(p.at)}
      </p>
      <div class="row">
        <button class="primary" disabled={busy} onClick={() => decide(true)}>
          {p.kind === "create" ? "Keep it" : "Close it"}
        </button>
        <button disabled={busy} onClick={() => decide(false)}>
          Turn down
        </button>
      </div>
      <ErrorLine text={err} />
    </section>
  );
}

function Progress({ r }: { r: Json }) {
  const p = (r.progress ?? {}) as Json;
  const parts = progressParts(p);
  const goal = typeof p.goal === "string" ? p.goal.trim() : "";
  const note = typeof p.note === "string" ? p.note.trim() : "";
  if (!goal && !note && !parts.length) return null;
  return (
    <section class="wcard" aria-labelledby="wpr-head">
      <h2 id="wpr-head">Progress</h2>
      {goal ? <p class="wgoal">{goal}</p> : null}
      {parts.map((part) => (
        <div key={part.key}>
          <h3>{part.label}</h3>
          <ul>
            {part.items.map((x, i) => (
              <li key={i}>{part.key === "files" ? <code>{x}</code> : x}</li>
            ))}
          </ul>
        </div>
      ))}
      {note ? <p class="wquote">{note}</p> : null}
      {r.progress_at ? <p class="meta">Updated {when(r.progress_at)}</p> : null}
    </section>
  );
}

function Sessions({ r }: { r: Json }) {
  const ids: string[] = Array.isArray(r.sessions) ? r.sessions.filter((s: unknown) => typeof s === "string") : [];
  const states = (r.session_states ?? {}) as Json;
  const [busy, err, run] = useOp();
  if (!ids.length) return null;
  return (
    <section class="wcard" aria-labelledby="ws-head">
      <h2 id="ws-head">Sessions</h2>
      <ul class="wsessions">
        {ids.map((s) => (
          <li key={s}>
            <SessionLink id={s} /> <span class={`dot ${String(states[s] ?? "")}`} aria-hidden="true" />
            <span class="meta">{String(states[s] ?? "closed")}</span>
            <button class="link" disabled={busy} aria-label={`Unlink session ${s.slice(0, 8)}`} onClick={() => run(() => request("requirement_unlink", { requirement: r.id, session: s }))}>
              Unlink
            </button>
          </li>
        ))}
      </ul>
      <ErrorLine text={err} />
    </section>
  );
}

/** Sends words to the latest session, or starts a new one behind the gate. */
function Reply({ r }: { r: Json }) {
  const access = useStore((s) => s.access);
  const hasSession = Array.isArray(r.sessions) && r.sessions.length > 0;
  const [text, setText] = useState("");
  const [fresh, setFresh] = useState(!hasSession);
  const [engine, setEngine] = useState("");
  const [plan, setPlan] = useState(false);
  const [mode, setMode] = useState("auto");
  const [busy, err, run] = useOp();
  const engines = access === "local" ? ["jucode", "claude", "codex", "acp"] : ["jucode", "claude", "codex"];
  const starting = fresh || !hasSession;
  return (
    <form
      class="wcard wform"
      aria-label={starting ? "Start a session on it" : "Reply"}
      onSubmit={(e) => {
        e.preventDefault();
        if (!starting && !text.trim()) return;
        void run(async () => {
          const fields: Json = { requirement: r.id, text: text.trim(), lang: lang() };
          if (starting) {
            fields.new_session = true;
            fields.plan = plan;
            fields.mode = mode;
            if (engine) fields.engine = engine;
          }
          const done = await request("requirement_reply", fields);
          setText("");
          setFresh(false);
          if (starting && typeof done.session === "string") navigate({ view: "session", id: done.session });
        });
      }}
    >
      <h2>{starting ? "Start a session on it" : "Reply"}</h2>
      {hasSession ? (
        <label class="check">
          <input type="checkbox" checked={fresh} onChange={(e) => setFresh(e.currentTarget.checked)} /> In a new session
        </label>
      ) : null}
      <label for="wrp-text">{starting ? "Anything to add (optional)" : "Your reply"}</label>
      <textarea id="wrp-text" rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      {starting ? (
        <div class="wopts">
          <label>
            <span id="wrp-engine">Engine</span>
            <select aria-labelledby="wrp-engine" value={engine} onChange={(e) => setEngine(e.currentTarget.value)}>
              <option value="">As before (else jucode)</option>
              {engines.map((x) => (
                <option key={x} value={x}>
                  {x}
                </option>
              ))}
            </select>
          </label>
          <label>
            <span id="wrp-mode">Then work in</span>
            <select aria-labelledby="wrp-mode" value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
              {WORK_MODES.map((m) => (
                <option key={m.value} value={m.value}>
                  {m.label}
                </option>
              ))}
            </select>
          </label>
          <label class="check">
            <input type="checkbox" checked={plan} onChange={(e) => setPlan(e.currentTarget.checked)} /> Ask for a plan first
          </label>
        </div>
      ) : null}
      <div class="row">
        <button type="submit" class="primary" disabled={busy || (!starting && !text.trim())}>
          {starting ? "Start" : "Send"}
        </button>
      </div>
      {starting ? <p class="muted">It first explains what it understood, read-only, and waits for you.</p> : null}
      <ErrorLine text={err} />
    </form>
  );
}

/** Editing the words, the project and the state; deleting. */
function Edit({ r, onDone }: { r: Json; onDone: () => void }) {
  const [text, setText] = useState(String(r.text ?? ""));
  const [project, setProject] = useState(typeof r.project === "string" ? r.project : "");
  const [state, setState] = useState(String(r.state ?? "idea"));
  // Deleting asks twice, in the page (no browser dialog): its sessions stay.
  const [sure, setSure] = useState(false);
  const [busy, err, run] = useOp();
  return (
    <form
      class="wcard wform"
      aria-label="Edit the requirement"
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          const fields: Json = { requirement: r.id, project: project || null };
          if (text.trim() && text !== r.text) fields.text = text.trim();
          if (state !== r.state) fields.state = state;
          await request("requirement_update", fields);
          onDone();
        });
      }}
    >
      <label for="we-text">Words</label>
      <textarea id="we-text" rows={4} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      <div class="wopts">
        <ProjectSelect id="we-project" value={project} onChange={setProject} />
        <label>
          <span id="we-state">State</span>
          <select aria-labelledby="we-state" value={state} onChange={(e) => setState(e.currentTarget.value)}>
            {["idea", "open", "done", "parked"].map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      </div>
      <div class="row">
        <button type="submit" class="primary" disabled={busy}>
          Save
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
        {sure ? (
          <button
            type="button"
            class="danger"
            disabled={busy}
            onClick={() =>
              void run(async () => {
                await request("requirement_delete", { requirement: r.id });
                navigate({ view: "work" });
              })
            }
          >
            Yes, delete {String(r.id)}
          </button>
        ) : (
          <button type="button" class="danger" disabled={busy} onClick={() => setSure(true)}>
            Delete
          </button>
        )}
      </div>
      <ErrorLine text={err} />
    </form>
  );
}

export function RequirementView({ id }: { id: string }) {
  const r = useStore((s) => s.requirements.find((x) => x.id === id));
  const conn = useStore((s) => s.conn.kind);
  const [editing, setEditing] = useState(false);
  const back = (
    <a
      class="back"
      href="/remote/work"
      onClick={(e) => {
        e.preventDefault();
        navigate({ view: "work" });
      }}
    >
      ← Work
    </a>
  );
  if (!r)
    return (
      <div class="work">
        {back}
        <p class="empty">{conn === "open" ? `No requirement ${id}.` : "Connecting…"}</p>
      </div>
    );
  const showReply = !r.gate && r.state !== "proposed";
  return (
    <div class="work wdetail">
      {back}
      <div class="wrow-top">
        <h1>{requirementTitle(r)}</h1>
        <StatusBadge status={r.status} />
      </div>
      <p class="meta">
        {String(r.id)} · {String(r.state)} · from {String(r.source ?? "")} · {when(r.updated_at)}
      </p>
      <p class="wtext">{String(r.text ?? "")}</p>
      <Images r={r} />
      {r.proposal ? <Proposal r={r} /> : null}
      {r.gate ? <Gate r={r} /> : null}
      {!r.gate && r.last_reply ? (
        <section class="wcard" aria-labelledby="wl-head">
          <h2 id="wl-head">{r.status === "failed" ? "The last turn failed" : "Latest reply"}</h2>
          <Markdown class="wreply" text={String(r.last_reply)} />
        </section>
      ) : null}
      <Progress r={r} />
      <Sessions r={r} />
      {showReply ? <Reply key={String(r.id)} r={r} /> : null}
      {editing ? (
        <Edit r={r} onDone={() => setEditing(false)} />
      ) : (
        <div class="row">
          <button onClick={() => setEditing(true)}>Edit</button>
        </div>
      )}
    </div>
  );
}
