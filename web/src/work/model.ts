// What the work view derives from the `requirements` and `dispatches` lists: labels, the order
// (what waits for the user first), the gate's next step, the progress sections. Pure, so the
// unit tests run it without a page.
import type { Json } from "../core/store";

/** How each requirement `status` reads, and whether it waits for the user. */
const STATUS: Record<string, { label: string; yours: boolean; rank: number }> = {
  confirm: { label: "Confirm", yours: true, rank: 0 },
  approval: { label: "Waiting for approval", yours: true, rank: 1 },
  proposal: { label: "Close proposed", yours: true, rank: 2 },
  proposed: { label: "Proposed", yours: true, rank: 3 },
  review: { label: "Your turn", yours: true, rank: 4 },
  failed: { label: "Failed", yours: true, rank: 5 },
  running: { label: "Running", yours: false, rank: 6 },
  open: { label: "Open", yours: false, rank: 7 },
  idea: { label: "Idea", yours: false, rank: 8 },
  parked: { label: "Parked", yours: false, rank: 9 },
  done: { label: "Done", yours: false, rank: 10 },
};

export function statusLabel(status: unknown): string {
  return STATUS[String(status)]?.label ?? String(status ?? "");
}

/** True when the requirement waits for the user (confirm, an approval, a proposal, review…). */
export function waitsForUser(r: Json): boolean {
  return STATUS[String(r.status)]?.yours ?? false;
}

function rank(r: Json): number {
  return STATUS[String(r.status)]?.rank ?? 99;
}

function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

/** What waits for the user first, then by status, then the latest change first. */
export function sortRequirements(list: Json[]): Json[] {
  return [...list].sort((a, b) => rank(a) - rank(b) || num(b.updated_at) - num(a.updated_at) || String(a.id).localeCompare(String(b.id)));
}

/** The title the daemon gave it, else the first line of its words, clipped. */
export function requirementTitle(r: Json): string {
  if (typeof r.title === "string" && r.title.trim()) return r.title.trim();
  const first = String(r.text ?? "").split("\n")[0]?.trim() ?? "";
  if (!first) return String(r.id ?? "");
  return first.length > 60 ? `${first.slice(0, 59)}…` : first;
}

/** A requirement id as the protocol writes them (`R-12`); anything else is not one. */
export function isRequirementId(v: unknown): v is string {
  return typeof v === "string" && /^R-\d{1,9}$/.test(v);
}

/** The requirement a notification's `?requirement=R-1` names, if any. */
export function requirementFromSearch(search: string): string | null {
  const v = new URLSearchParams(search).get("requirement");
  return isRequirementId(v) ? v : null;
}

export interface GateStep {
  /** What the session is doing at this stage. */
  doing: string;
  /** The confirm button: what confirming starts. */
  confirm: string;
}

/** The gate's stage as the user reads it, and what confirming it leads to. */
export function gateStep(gate: Json): GateStep {
  if (gate.stage === "plan") return { doing: "Writing a plan (read-only)", confirm: "Approve the plan and start" };
  if (gate.plan) return { doing: "Explaining its understanding (read-only)", confirm: "Confirm and ask for a plan" };
  return { doing: "Explaining its understanding (read-only)", confirm: "Confirm and start" };
}

/** The permission modes a client names; the daemon translates them for each engine. */
export const WORK_MODES: { value: string; label: string }[] = [
  { value: "ask", label: "Ask before each change" },
  { value: "edits", label: "Edit files, ask for commands" },
  { value: "auto", label: "Auto" },
  { value: "all", label: "Full access" },
  { value: "plan", label: "Read-only" },
];

export function modeLabel(mode: unknown): string {
  return WORK_MODES.find((m) => m.value === mode)?.label ?? String(mode ?? "");
}

export const PROGRESS_PARTS: { key: string; label: string }[] = [
  { key: "decided", label: "Decided" },
  { key: "done", label: "Done" },
  { key: "doing", label: "Doing" },
  { key: "blocked", label: "Blocked" },
  { key: "next", label: "Next" },
  { key: "files", label: "Files" },
];

/** The progress record's lists that have items, in the order above; strings only. */
export function progressParts(p: unknown): { key: string; label: string; items: string[] }[] {
  if (!p || typeof p !== "object") return [];
  const rec = p as Json;
  return PROGRESS_PARTS.flatMap(({ key, label }) => {
    const items = Array.isArray(rec[key]) ? rec[key].filter((x: unknown): x is string => typeof x === "string" && x.trim() !== "") : [];
    return items.length ? [{ key, label, items }] : [];
  });
}

/** The proposal on a requirement in words: who proposed what, and why. */
export function proposalText(p: Json): string {
  const who = typeof p.agent === "string" && p.agent ? `Agent ${p.agent}` : "An agent";
  if (p.kind === "create") return `${who} proposes to note this requirement.`;
  const outcome = p.outcome === "parked" ? "parked" : "done";
  return `${who} proposes to close it as ${outcome}.`;
}

/** A data URL of an image the page may show; anything else (another scheme, svg) is refused. */
export function safeImageUrl(v: unknown): string | null {
  return typeof v === "string" && /^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]*$/.test(v) ? v : null;
}

/** The gate prompts' language: Chinese for a Chinese browser, else English. */
export function gateLang(languages: readonly string[]): "zh" | "en" {
  return languages.some((l) => l.toLowerCase().startsWith("zh")) ? "zh" : "en";
}

/** A project a requirement may belong to: its id and how the list names it. */
export function projectChoices(workspaces: Json[]): { id: string; label: string; path: string }[] {
  const out: { id: string; label: string; path: string }[] = [];
  for (const w of workspaces)
    for (const p of Array.isArray(w.projects) ? w.projects : [])
      if (typeof p?.id === "string") out.push({ id: p.id, path: String(p.path ?? ""), label: `${String(p.name ?? p.path ?? p.id)} · ${String(w.name ?? "")}` });
  return out;
}

// Dispatch.

const DISPATCH: Record<string, { label: string; rank: number }> = {
  awaiting: { label: "Plan waiting for you", rank: 0 },
  planning: { label: "Planning", rank: 1 },
  running: { label: "Running", rank: 2 },
  failed: { label: "Failed", rank: 3 },
  done: { label: "Done", rank: 4 },
  cancelled: { label: "Cancelled", rank: 5 },
};

const TASK: Record<string, string> = {
  planned: "Planned",
  sent: "Sent",
  running: "Running",
  waiting: "Waiting for approval",
  done: "Done",
  failed: "Failed",
};

export function dispatchStatusLabel(s: unknown): string {
  return DISPATCH[String(s)]?.label ?? String(s ?? "");
}

export function taskStatusLabel(s: unknown): string {
  return TASK[String(s)] ?? String(s ?? "");
}

/** Plans waiting for the user first, then what runs; the newest first within each. */
export function sortDispatches(list: Json[]): Json[] {
  const r = (d: Json) => DISPATCH[String(d.status)]?.rank ?? 99;
  return [...list].sort((a, b) => r(a) - r(b) || num(b.created_at) - num(a.created_at));
}

/** The approval modes a dispatch's tasks may run in, as the protocol names them. */
export const DISPATCH_MODES: { value: string; label: string }[] = [
  { value: "manual", label: "Ask before each change" },
  { value: "auto-edit", label: "Edit files, ask for commands" },
  { value: "auto", label: "Auto" },
  { value: "full-access", label: "Full access" },
];

/** How many things in the work view wait for the user: requirements and plans. */
export function workWaiting(requirements: Json[], dispatches: Json[]): number {
  return requirements.filter(waitsForUser).length + dispatches.filter((d) => d.status === "awaiting").length;
}
