// An op button's state, shared by the views: busy while the op runs, the daemon's error after,
// and the line that shows that error.
import { useState } from "preact/hooks";

export function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** `[busy, error, run, setError]`; `run` resolves to whether the op succeeded. */
export function useOp(): [boolean, string, (fn: () => Promise<unknown>) => Promise<boolean>, (s: string) => void] {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const run = async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setErr("");
    try {
      await fn();
      return true;
    } catch (e) {
      setErr(errText(e));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return [busy, err, run, setErr];
}

export function ErrorLine({ text }: { text: string }) {
  return text ? (
    <p class="op-err" role="alert">
      {text}
    </p>
  ) : null;
}
