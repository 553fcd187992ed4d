// Small pieces the work views share: an op button's busy and error state, the error line, the status badge.
import { useState } from "preact/hooks";
import { statusLabel } from "./model";

export function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A small async-button state: busy while the op runs, the daemon's error after. */
export function useOp(): [boolean, string, (fn: () => Promise<unknown>) => Promise<void>] {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const run = async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setErr("");
    try {
      await fn();
    } catch (e) {
      setErr(errText(e));
    } finally {
      setBusy(false);
    }
  };
  return [busy, err, run];
}

export function ErrorLine({ text }: { text: string }) {
  return text ? (
    <p class="notice error" role="alert">
      {text}
    </p>
  ) : null;
}

export function StatusBadge({ status }: { status: unknown }) {
  return <span class={`badge wstatus-${String(status).replace(/[^a-z-]/g, "")}`}>{statusLabel(status)}</span>;
}

