// The inbox as one list: what waits for the user (open questions, pending actions, reports)
// newest first, and what is done (answered or closed questions, decided or closed actions).
// Pure functions, so the unit tests can check the order and the count.
import type { Json } from "../core/store";

export type InboxKind = "action" | "question" | "report";

export interface InboxItem {
  kind: InboxKind;
  key: string;
  /** When it arrived (ms): created_at, asked_at or at. */
  at: number;
  /** When it was closed (ms), for the done section. */
  doneAt?: number;
  data: Json;
}

function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

export function inboxLists(
  actions: Json[],
  actionsClosed: Json[],
  questions: Json[],
  questionsClosed: Json[],
  reports: Json[],
): { open: InboxItem[]; done: InboxItem[] } {
  const open: InboxItem[] = [
    ...actions.map((a): InboxItem => ({ kind: "action", key: `a:${a.id}`, at: num(a.created_at), data: a })),
    ...questions.map((q): InboxItem => ({ kind: "question", key: `q:${q.id}`, at: num(q.asked_at), data: q })),
    ...reports.map((r): InboxItem => ({ kind: "report", key: `r:${r.id}`, at: num(r.at), data: r })),
  ].sort((x, y) => y.at - x.at);
  const done: InboxItem[] = [
    ...actionsClosed.map((a): InboxItem => ({ kind: "action", key: `a:${a.id}`, at: num(a.created_at), doneAt: num(a.closed_at), data: a })),
    ...questionsClosed.map((q): InboxItem => ({ kind: "question", key: `q:${q.id}`, at: num(q.asked_at), doneAt: num(q.closed_at), data: q })),
  ].sort((x, y) => (y.doneAt ?? 0) - (x.doneAt ?? 0));
  return { open, done };
}

/** What waits for the user: open questions, pending actions and unread reports. */
export function waitingCount(questions: Json[], actions: Json[], reports: Json[]): number {
  return questions.length + actions.length + reports.filter((r) => !r.read).length;
}

/** Whether a closed question may be reopened (the daemon refuses answered ones). */
export function canReopenQuestion(q: Json): boolean {
  return q.closed_reason !== "answered" && q.closed_by !== "agent_deleted";
}
