// Scheduled tasks: the form's fields and the `schedule_save` payload built from them, and a
// short human description of a task's repeat. Pure, for the unit tests.
import type { Json } from "../core/store";

export type Repeat = "once" | "hourly" | "daily" | "weekdays" | "weekly" | "cron";
export const REPEATS: Repeat[] = ["once", "hourly", "daily", "weekdays", "weekly", "cron"];
export const DAY_NAMES = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

export interface ScheduleForm {
  id?: string;
  agent: string;
  name: string;
  prompt: string;
  repeat: Repeat;
  time: string;
  days: number[];
  date: string;
  cron: string;
  enabled: boolean;
  new_session: boolean;
}

export function emptyForm(agent: string): ScheduleForm {
  return { agent, name: "", prompt: "", repeat: "daily", time: "09:00", days: [1], date: "", cron: "", enabled: true, new_session: true };
}

export function formFromTask(t: Json): ScheduleForm {
  const repeat = (REPEATS as string[]).includes(t.repeat) ? (t.repeat as Repeat) : "daily";
  return {
    id: String(t.id),
    agent: String(t.agent ?? ""),
    name: String(t.name ?? ""),
    prompt: String(t.prompt ?? ""),
    repeat,
    time: String(t.time ?? ""),
    days: Array.isArray(t.days) ? t.days.filter((d: unknown) => typeof d === "number") : [],
    date: typeof t.date === "string" ? t.date : "",
    cron: typeof t.cron === "string" ? t.cron : "",
    enabled: t.enabled !== false,
    new_session: t.new_session !== false,
  };
}

/** The `schedule` object of `schedule_save`: only what the repeat uses, the daemon checks the rest. */
export function payload(f: ScheduleForm): Json {
  const s: Json = { name: f.name, prompt: f.prompt, repeat: f.repeat, enabled: f.enabled, new_session: f.new_session };
  if (f.id) s.id = f.id;
  else s.agent = f.agent;
  if (f.repeat === "cron") {
    s.cron = f.cron.trim();
    s.time = "";
  } else s.time = f.time;
  // Fields the repeat does not use are left out: the daemon refuses them ("days is only for
  // weekly tasks") and drops them itself when an edit changes the repeat.
  if (f.repeat === "weekly") s.days = [...new Set(f.days)].sort((a, b) => a - b);
  if (f.repeat === "once") s.date = f.date;
  return s;
}

export function describeRepeat(t: Json): string {
  switch (t.repeat) {
    case "once":
      return `once on ${t.date ?? "?"} at ${t.time ?? "?"}`;
    case "hourly":
      return `hourly at minute ${String(t.time ?? "").split(":")[1] ?? "?"}`;
    case "daily":
      return `daily at ${t.time}`;
    case "weekdays":
      return `weekdays at ${t.time}`;
    case "weekly":
      return `${(Array.isArray(t.days) ? t.days : []).map((d: number) => DAY_NAMES[d] ?? "?").join(", ")} at ${t.time}`;
    case "cron":
      return `cron ${t.cron ?? ""}`;
    default:
      return String(t.repeat ?? "");
  }
}

/** Task times are Unix seconds (unlike the rest of the protocol). */
export function secondsToMs(s: unknown): number | null {
  return typeof s === "number" && s > 0 ? s * 1000 : null;
}
