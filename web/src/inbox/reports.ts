// Reports, which the store does not keep: the list comes from `report_list` whenever the
// connection opens or a report is posted or read elsewhere (store.reportsRev), and a report
// read here is marked read at once (the daemon sends `report_read` to the other clients only).
import { useEffect, useState } from "preact/hooks";
import { request } from "../core/daemon";
import { store, type Json } from "../core/store";

let reports: Json[] = [];
let loaded = false;
const listeners = new Set<() => void>();

function set(next: Json[]): void {
  reports = next;
  loaded = true;
  for (const l of listeners) l();
}

let inFlight = false;
let again = false;
export async function loadReports(): Promise<void> {
  if (inFlight) {
    again = true;
    return;
  }
  inFlight = true;
  try {
    const f = (await request("report_list", { limit: 200 })) as Json;
    if (Array.isArray(f.reports)) set(f.reports);
  } catch {
    // Not connected yet or refused: the next open or broadcast tries again.
  } finally {
    inFlight = false;
    if (again) {
      again = false;
      void loadReports();
    }
  }
}

/** Marks a report read, here at once and at the daemon. */
export async function readReport(id: string): Promise<void> {
  set(reports.map((r) => (r.id === id ? { ...r, read: true } : r)));
  await request("report_read", { report: id });
}

let started = false;
function start(): void {
  if (started) return;
  started = true;
  let lastRev = store.state.reportsRev;
  let wasOpen = store.state.conn.kind === "open";
  if (wasOpen) void loadReports();
  store.subscribe(() => {
    const s = store.state;
    const open = s.conn.kind === "open";
    if ((open && !wasOpen) || (open && s.reportsRev !== lastRev)) void loadReports();
    wasOpen = open;
    lastRev = s.reportsRev;
  });
}

export function useReports(): { reports: Json[]; loaded: boolean } {
  start();
  const [, tick] = useState(0);
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    listeners.add(l);
    return () => listeners.delete(l);
  }, []);
  return { reports, loaded };
}
