// Deferred actions, questions and reports, as one inbox: what waits for the user first, newest
// first, then what is done. Every text in here came from an agent or a tool: plain text, or
// markdown through ui/markdown.tsx.
import { useState } from "preact/hooks";
import "./inbox.css";
import { connection, request } from "../core/daemon";
import { navigate } from "../core/route";
import { store, useStore, type Json } from "../core/store";
import { Markdown } from "../ui/markdown";
import { canReopenQuestion, inboxLists, type InboxItem } from "./model";
import { readReport, useReports } from "./reports";
import { ErrorLine, useOp } from "../ui/op";

export function when(ms: unknown): string {
  if (typeof ms !== "number" || !ms) return "";
  const d = new Date(ms);
  const today = new Date();
  const sameDay = d.toDateString() === today.toDateString();
  return sameDay ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : d.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

function SessionLink({ id }: { id: unknown }) {
  if (typeof id !== "string" || !id) return null;
  return (
    <a
      href={`/remote/s/${encodeURIComponent(id)}`}
      onClick={(e) => {
        e.preventDefault();
        navigate({ view: "session", id });
      }}
    >
      session {id.slice(0, 8)}
    </a>
  );
}

/**
 * `decide_action` has no reply of its own when it succeeds: the daemon broadcasts `actions`
 * with the action closed. So we wait for whichever comes first, an error reply (by id) or the
 * action leaving the open list.
 */
function decide(a: Json, decision: "allow" | "deny"): Promise<void> {
  const conn = connection();
  if (!conn) return Promise.reject(new Error("not connected"));
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (e?: Error) => {
      if (settled) return;
      settled = true;
      unsub();
      if (e) reject(e);
      else resolve();
    };
    const unsub = store.subscribe(() => {
      if (!store.state.actions.some((x) => x.id === a.id)) finish();
    });
    conn.request("decide_action", { session: a.session_id, action: a.id, decision }, 15_000).then(
      () => finish(),
      (e) => finish(/no answer/.test(String(e?.message)) ? undefined : (e as Error)),
    );
  });
}

function ActionCard({ a, done }: { a: Json; done: boolean }) {
  const [busy, err, run] = useOp();
  return (
    <>
      <p class="inbox-what">
        <span class="sr-only">Wants to run: </span>
        <code>{String(a.summary || a.name || "a tool call")}</code>
      </p>
      <p class="meta">
        {String(a.name ?? "")} · <SessionLink id={a.session_id} /> {a.cwd ? <>· {String(a.cwd)}</> : null}
      </p>
      {done ? (
        <p class="meta">
          {a.closed_reason === "allow" ? "Allowed" : a.closed_reason === "deny" ? "Denied" : `Closed${a.closed_reason ? `: ${a.closed_reason}` : ""}`} {when(a.closed_at)}
        </p>
      ) : null}
      <div class="inbox-actions">
        {done ? (
          a.closed_reason !== "allow" && a.closed_reason !== "deny" ? (
            <button disabled={busy} onClick={() => run(() => request("item_reopen", { kind: "action", item: a.id }))}>
              Reopen
            </button>
          ) : null
        ) : (
          <>
            <button class="primary" disabled={busy} onClick={() => run(() => decide(a, "allow"))}>
              Allow
            </button>
            <button disabled={busy} onClick={() => run(() => decide(a, "deny"))}>
              Deny
            </button>
            <button disabled={busy} onClick={() => run(() => request("item_close", { kind: "action", item: a.id }))}>
              Close
            </button>
          </>
        )}
      </div>
      <ErrorLine text={err} />
    </>
  );
}

function QuestionCard({ q, done }: { q: Json; done: boolean }) {
  const [answer, setAnswer] = useState("");
  const [busy, err, run] = useOp();
  const id = `ans-${String(q.id)}`;
  return (
    <>
      <h3 class="inbox-title">{String(q.title ?? "")}</h3>
      {q.body ? <Markdown text={String(q.body)} /> : null}
      <dl class="inbox-facts">
        {q.assumption ? (
          <>
            <dt>Assumes</dt>
            <dd>{String(q.assumption)}</dd>
          </>
        ) : null}
        {q.default ? (
          <>
            <dt>Default</dt>
            <dd>{String(q.default)}</dd>
          </>
        ) : null}
        {!done && q.due_at ? (
          <>
            <dt>Due</dt>
            <dd>{when(q.due_at)}</dd>
          </>
        ) : null}
        {done && q.answer ? (
          <>
            <dt>Answer</dt>
            <dd>{String(q.answer)}</dd>
          </>
        ) : null}
      </dl>
      <p class="meta">
        {q.agent ? <>{String(q.agent)} · </> : null}
        <SessionLink id={q.session} />
        {q.importance && q.importance !== "normal" ? <> · {String(q.importance)} importance</> : null}
        {done ? <> · {q.closed_reason === "answered" ? "answered" : `closed${q.closed_reason ? `: ${q.closed_reason}` : ""}`} {when(q.closed_at)}</> : null}
      </p>
      {done ? (
        canReopenQuestion(q) ? (
          <div class="inbox-actions">
            <button disabled={busy} onClick={() => run(() => request("item_reopen", { kind: "question", item: q.id }))}>
              Reopen
            </button>
          </div>
        ) : null
      ) : (
        <form
          class="inbox-answer"
          onSubmit={(e) => {
            e.preventDefault();
            if (!answer.trim()) return;
            void run(async () => {
              await request("question_answer", { question: q.id, answer });
              setAnswer("");
            });
          }}
        >
          <label for={id}>Your answer</label>
          <textarea id={id} rows={2} value={answer} onInput={(e) => setAnswer((e.target as HTMLTextAreaElement).value)} />
          <div class="inbox-actions">
            <button type="submit" disabled={busy || !answer.trim()}>
              Answer
            </button>
            <button type="button" disabled={busy} onClick={() => run(() => request("item_close", { kind: "question", item: q.id }))}>
              Close
            </button>
          </div>
        </form>
      )}
      <ErrorLine text={err} />
    </>
  );
}

function ReportCard({ r }: { r: Json }) {
  const [open, setOpen] = useState(false);
  const [busy, err, run] = useOp();
  const bodyId = `rep-${String(r.id)}`;
  return (
    <>
      <button
        class="inbox-report-head"
        aria-expanded={open}
        aria-controls={bodyId}
        disabled={busy}
        onClick={() => {
          setOpen(!open);
          if (!open && !r.read) void run(() => readReport(String(r.id)));
        }}
      >
        <span class="inbox-title">{String(r.title ?? "")}</span>
        {!r.read ? <span class="inbox-unread">unread</span> : null}
      </button>
      {r.agent ? <p class="meta">from {String(r.agent)}</p> : null}
      {open ? (
        <div id={bodyId}>
          <Markdown text={String(r.body ?? "")} />
          <p class="meta">
            <SessionLink id={r.session} />
          </p>
        </div>
      ) : null}
      <ErrorLine text={err} />
    </>
  );
}

const BADGE: Record<InboxItem["kind"], string> = { action: "Action", question: "Question", report: "Report" };

function Item({ item, done }: { item: InboxItem; done: boolean }) {
  const unread = item.kind === "report" && !item.data.read;
  return (
    <li class={`inbox-item inbox-${item.kind}${unread ? " is-unread" : ""}`} data-testid={`inbox-${item.kind}`} data-id={String(item.data.id)}>
      <div class="inbox-top">
        <span class={`badge badge-${item.kind}`}>{BADGE[item.kind]}</span>
        <span class="meta">{when(item.at)}</span>
      </div>
      {item.kind === "action" && <ActionCard a={item.data} done={done} />}
      {item.kind === "question" && <QuestionCard q={item.data} done={done} />}
      {item.kind === "report" && <ReportCard r={item.data} />}
    </li>
  );
}

export function InboxView() {
  const actions = useStore((s) => s.actions);
  const actionsClosed = useStore((s) => s.actionsClosed);
  const questions = useStore((s) => s.questions);
  const questionsClosed = useStore((s) => s.questionsClosed);
  const { reports, loaded } = useReports();
  const { open, done } = inboxLists(actions, actionsClosed, questions, questionsClosed, reports);
  const [showDone, setShowDone] = useState(false);
  return (
    <section aria-labelledby="inbox-h" class="inbox">
      <h1 id="inbox-h">Inbox</h1>
      {open.length === 0 && <p class="empty">{loaded ? "Nothing waits for you." : "Loading…"}</p>}
      <ul class="inbox-list" aria-live="polite" data-testid="inbox-open">
        {open.map((i) => (
          <Item key={i.key} item={i} done={false} />
        ))}
      </ul>
      {done.length > 0 && (
        <section aria-labelledby="inbox-done-h" class="inbox-done">
          <h2 id="inbox-done-h">
            <button aria-expanded={showDone} onClick={() => setShowDone(!showDone)}>
              Done ({done.length})
            </button>
          </h2>
          {showDone && (
            <ul class="inbox-list" data-testid="inbox-done">
              {done.map((i) => (
                <Item key={i.key} item={i} done={true} />
              ))}
            </ul>
          )}
        </section>
      )}
    </section>
  );
}
