// Dispatch: a batch of requests handed to the daemon, which a reserved agent splits into tasks
// across the user's projects. The form sends one; each dispatch shows its tasks as they run,
// its plan to approve when it asked for one, and its summary. Titles, replies and summaries
// come from models: text only.
import { useState } from "preact/hooks";
import { request } from "../core/daemon";
import { navigate } from "../core/route";
import { useStore, type Json } from "../core/store";
import { when } from "../inbox/view";
import { DISPATCH_MODES, dispatchStatusLabel, requirementTitle, sortDispatches, taskStatusLabel } from "./model";
import { ErrorLine, useOp } from "./ui";

function SendForm() {
  const requirements = useStore((s) => s.requirements);
  const [text, setText] = useState("");
  const [plan, setPlan] = useState(true);
  const [mode, setMode] = useState("auto");
  const [requirement, setRequirement] = useState("");
  const [busy, err, run] = useOp();
  const open = requirements.filter((r) => r.state === "idea" || r.state === "open");
  return (
    <form
      class="wform"
      aria-label="New dispatch"
      onSubmit={(e) => {
        e.preventDefault();
        if (!text.trim()) return;
        void run(async () => {
          const fields: Json = { text: text.trim(), plan, approval_mode: mode };
          if (requirement) fields.requirement = requirement;
          await request("dispatch_send", fields);
          setText("");
        });
      }}
    >
      <label for="wd-text">Requests to split across your projects</label>
      <textarea id="wd-text" rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      <div class="wopts">
        <label>
          <span id="wd-mode">Tasks run in</span>
          <select aria-labelledby="wd-mode" value={mode} onChange={(e) => setMode(e.currentTarget.value)}>
            {DISPATCH_MODES.map((m) => (
              <option key={m.value} value={m.value}>
                {m.label}
              </option>
            ))}
          </select>
        </label>
        {open.length > 0 && (
          <label>
            <span id="wd-req">For requirement</span>
            <select aria-labelledby="wd-req" value={requirement} onChange={(e) => setRequirement(e.currentTarget.value)}>
              <option value="">None</option>
              {open.map((r) => (
                <option key={String(r.id)} value={String(r.id)}>
                  {String(r.id)} · {requirementTitle(r)}
                </option>
              ))}
            </select>
          </label>
        )}
        <label class="check">
          <input type="checkbox" checked={plan} onChange={(e) => setPlan(e.currentTarget.checked)} /> Show me the plan first
        </label>
      </div>
      <div class="row">
        <button type="submit" class="primary" disabled={busy || !text.trim()}>
          Dispatch
        </button>
      </div>
      <ErrorLine text={err} />
    </form>
  );
}

function Task({ t }: { t: Json }) {
  const session = typeof t.session === "string" && t.session ? t.session : "";
  return (
    <li class={`wtask t-${String(t.status).replace(/[^a-z]/g, "")}`}>
      <span class="wrow-top">
        <span class="wtitle">{String(t.title ?? `Task ${String(t.id)}`)}</span>
        <span class="badge">{taskStatusLabel(t.status)}</span>
      </span>
      <span class="meta">
        {String(t.project ?? "")}
        {t.engine ? <> · {String(t.engine)}</> : null}
        {session ? (
          <>
            {" "}
            ·{" "}
            <a
              href={`/remote/s/${encodeURIComponent(session)}`}
              onClick={(e) => {
                e.preventDefault();
                navigate({ view: "session", id: session });
              }}
            >
              session {session.slice(0, 8)}
            </a>
          </>
        ) : null}
      </span>
      {t.reply ? <span class="wquote">{String(t.reply)}</span> : null}
    </li>
  );
}

function Decide({ d }: { d: Json }) {
  const [note, setNote] = useState("");
  const [busy, err, run] = useOp();
  const noteId = `wdn-${String(d.id)}`;
  const decide = (approve: boolean) =>
    run(async () => {
      const fields: Json = { dispatch: d.id, approve };
      if (note.trim()) fields.note = note.trim();
      await request("dispatch_confirm", fields);
      setNote("");
    });
  return (
    <div class="wdecide">
      <label for={noteId}>Note for the dispatcher (optional)</label>
      <textarea id={noteId} rows={2} value={note} onInput={(e) => setNote(e.currentTarget.value)} />
      <div class="row">
        <button class="primary" disabled={busy} onClick={() => decide(true)}>
          Run the plan
        </button>
        <button disabled={busy} onClick={() => decide(false)}>
          Cancel it
        </button>
      </div>
      <ErrorLine text={err} />
    </div>
  );
}

function Dispatch({ d }: { d: Json }) {
  const tasks: Json[] = Array.isArray(d.tasks) ? d.tasks : [];
  return (
    <li class={`wcard wdispatch${d.status === "awaiting" ? " yours" : ""}`} aria-label={`Dispatch ${String(d.id).slice(0, 8)}`}>
      <span class="wrow-top">
        <span class="wtext wclip">{String(d.text ?? "")}</span>
        <span class="badge">{dispatchStatusLabel(d.status)}</span>
      </span>
      <span class="meta">
        {when(d.created_at)}
        {d.mode ? <> · {String(d.mode)}</> : null}
        {tasks.length ? <> · {tasks.length === 1 ? "1 task" : `${tasks.length} tasks`}</> : null}
      </span>
      {tasks.length > 0 && (
        <ol class="wtasks" aria-label="Tasks">
          {tasks.map((t) => (
            <Task key={String(t.id)} t={t} />
          ))}
        </ol>
      )}
      {d.status === "awaiting" ? <Decide d={d} /> : null}
      {d.summary ? <p class="wquote">{String(d.summary)}</p> : null}
    </li>
  );
}

export function DispatchSection() {
  const dispatches = useStore((s) => s.dispatches);
  const [showAll, setShowAll] = useState(false);
  const sorted = sortDispatches(dispatches);
  const shown = showAll ? sorted : sorted.slice(0, 10);
  return (
    <section aria-labelledby="w-disp">
      <h2 id="w-disp">Dispatch</h2>
      <SendForm />
      {sorted.length === 0 ? <p class="empty">Nothing dispatched yet.</p> : null}
      <ul class="wdispatches" aria-label="Dispatches">
        {shown.map((d) => (
          <Dispatch key={String(d.id)} d={d} />
        ))}
      </ul>
      {sorted.length > shown.length && (
        <button class="link" onClick={() => setShowAll(true)}>
          Show all {sorted.length}
        </button>
      )}
    </section>
  );
}
