// An agent's scheduled tasks: list (next and last run, enabled), create and edit, run now,
// delete, and the usage of a task's runs.
import { useState } from "preact/hooks";
import { request } from "../core/daemon";
import { useStore, type Json } from "../core/store";
import { when } from "../inbox/view";
import { ErrorLine, useOp } from "./view";
import { DAY_NAMES, REPEATS, describeRepeat, emptyForm, formFromTask, payload, secondsToMs, type Repeat, type ScheduleForm } from "./schedule-model";

function Editor({ initial, onDone }: { initial: ScheduleForm; onDone: () => void }) {
  const [f, setF] = useState(initial);
  const [busy, err, run] = useOp();
  const up = (patch: Partial<ScheduleForm>) => setF({ ...f, ...patch });
  const uid = initial.id ?? "new";
  return (
    <form
      class="agents-form sched-form"
      aria-label={initial.id ? `Edit task ${initial.name}` : "New task"}
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          await request("schedule_save", { schedule: payload(f) });
          onDone();
        });
      }}
    >
      <label>
        Task name
        <input value={f.name} required onInput={(e) => up({ name: (e.target as HTMLInputElement).value })} />
      </label>
      <label>
        Prompt
        <textarea rows={3} value={f.prompt} required onInput={(e) => up({ prompt: (e.target as HTMLTextAreaElement).value })} />
      </label>
      <label>
        Repeat
        <select aria-label="Repeat" value={f.repeat} onChange={(e) => up({ repeat: (e.target as HTMLSelectElement).value as Repeat })}>
          {REPEATS.map((r) => (
            <option value={r}>{r}</option>
          ))}
        </select>
      </label>
      {f.repeat === "once" && (
        <label>
          Date
          <input type="date" value={f.date} required onInput={(e) => up({ date: (e.target as HTMLInputElement).value })} />
        </label>
      )}
      {f.repeat !== "cron" && (
        <label>
          {f.repeat === "hourly" ? "Time (its minute is used)" : "Time"}
          <input type="time" value={f.time} required onInput={(e) => up({ time: (e.target as HTMLInputElement).value })} />
        </label>
      )}
      {f.repeat === "weekly" && (
        <fieldset class="sched-days">
          <legend>Days</legend>
          {DAY_NAMES.map((d, i) => (
            <label class="agents-check">
              <input
                type="checkbox"
                checked={f.days.includes(i)}
                onChange={(e) => up({ days: (e.target as HTMLInputElement).checked ? [...f.days, i] : f.days.filter((x) => x !== i) })}
              />
              {d}
            </label>
          ))}
        </fieldset>
      )}
      {f.repeat === "cron" && (
        <label>
          Cron expression (minute hour day month weekday)
          <input value={f.cron} required placeholder="30 9 * * 1-5" onInput={(e) => up({ cron: (e.target as HTMLInputElement).value })} />
        </label>
      )}
      <label class="agents-check">
        <input type="checkbox" checked={f.enabled} onChange={(e) => up({ enabled: (e.target as HTMLInputElement).checked })} />
        Enabled
      </label>
      <label class="agents-check">
        <input type="checkbox" checked={f.new_session} onChange={(e) => up({ new_session: (e.target as HTMLInputElement).checked })} />
        A new session for each run (else continue the last one)
      </label>
      <div class="agents-row">
        <button type="submit" disabled={busy} id={`sched-save-${uid}`}>
          Save task
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      <ErrorLine text={err} />
    </form>
  );
}

function fmtNum(n: unknown): string {
  return typeof n === "number" ? n.toLocaleString() : "0";
}

function Usage({ u }: { u: Json }) {
  const t = (u.totals ?? {}) as Json;
  const cost = typeof t.estimated_cost_usd === "number" ? `$${t.estimated_cost_usd.toFixed(4)}` : "unpriced";
  return (
    <p class="meta sched-usage" role="status">
      Usage: {fmtNum(t.turns)} turns in {Array.isArray(u.sessions) ? u.sessions.length : 0} sessions · {fmtNum(t.input_tokens)} in / {fmtNum(t.output_tokens)} out tokens · {cost}
      {t.running ? ` · ${t.running} running` : ""}
    </p>
  );
}

function Task({ t }: { t: Json }) {
  const [editing, setEditing] = useState(false);
  const [usage, setUsage] = useState<Json | null>(null);
  const [armed, setArmed] = useState(false);
  const [note, setNote] = useState("");
  const [busy, err, run] = useOp();
  const next = secondsToMs(t.next_run_at);
  const last = secondsToMs(t.last_run_at);
  if (editing) return <Editor initial={formFromTask(t)} onDone={() => setEditing(false)} />;
  return (
    <li class="sched-task" data-testid="schedule" data-id={String(t.id)}>
      <div class="agents-head">
        <strong>{String(t.name || t.id)}</strong>
        <span class={t.enabled ? "sched-on" : "sched-off"}>{t.enabled ? "enabled" : "disabled"}</span>
      </div>
      <p class="meta">{describeRepeat(t)}</p>
      <p class="meta">
        Next: {next ? when(next) : "—"} · Last: {last ? when(last) : "never"}
      </p>
      <p class="sched-prompt">{String(t.prompt ?? "")}</p>
      <div class="agents-row">
        <button
          disabled={busy}
          onClick={() =>
            run(async () => {
              await request("schedule_run", { schedule: t.id });
              setNote("Started.");
            })
          }
        >
          Run now
        </button>
        <button disabled={busy} onClick={() => run(() => request("schedule_save", { schedule: { id: t.id, enabled: !t.enabled } }))}>
          {t.enabled ? "Disable" : "Enable"}
        </button>
        <button onClick={() => setEditing(true)}>Edit</button>
        <button disabled={busy} onClick={() => run(async () => setUsage((await request("schedule_usage", { schedule: t.id })) as Json))}>
          Usage
        </button>
        {armed ? (
          <>
            <button class="danger" disabled={busy} onClick={() => run(() => request("schedule_delete", { schedule: t.id }))}>
              Yes, delete
            </button>
            <button onClick={() => setArmed(false)}>Keep</button>
          </>
        ) : (
          <button onClick={() => setArmed(true)}>Delete…</button>
        )}
      </div>
      <span role="status" class="meta">
        {note}
      </span>
      {usage && <Usage u={usage} />}
      <ErrorLine text={err} />
    </li>
  );
}

export function Schedules({ agent }: { agent: Json }) {
  const all = useStore((s) => s.schedules);
  const tasks = all.filter((t) => t.agent === agent.id);
  const [adding, setAdding] = useState(false);
  return (
    <section aria-labelledby="sched-h" class="agents-card">
      <div class="agents-head">
        <h2 id="sched-h">Scheduled tasks</h2>
        {!adding && <button onClick={() => setAdding(true)}>New task</button>}
      </div>
      {adding && <Editor initial={emptyForm(String(agent.id))} onDone={() => setAdding(false)} />}
      {tasks.length === 0 && !adding && <p class="empty">No scheduled tasks.</p>}
      <ul class="sched-list" aria-live="polite">
        {tasks.map((t) => (
          <Task key={t.id} t={t} />
        ))}
      </ul>
    </section>
  );
}
