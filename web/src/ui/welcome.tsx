// What a page with no way in yet shows: how to get one, and the pairing code form.
import { useState } from "preact/hooks";
import { pairErrorText, pairWithCode } from "../core/auth";
import "./welcome.css";

/** Keeps what a code can hold: the daemon's alphabet is upper-case letters and digits. */
export function tidyCode(raw: string): string {
  return raw.toUpperCase().replace(/[^A-Z0-9]/g, "").slice(0, 8);
}

export function Welcome({ error, code: initial, onPaired }: { error?: string; code?: string; onPaired?: () => void }) {
  const [code, setCode] = useState(tidyCode(initial ?? ""));
  const [problem, setProblem] = useState(error ?? "");
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const c = tidyCode(code);
    if (!c) {
      setProblem("Type the code the computer shows.");
      return;
    }
    if (!onPaired) {
      location.assign(`/remote?pair=${encodeURIComponent(c)}`);
      return;
    }
    setBusy(true);
    setProblem("");
    try {
      await pairWithCode(c);
      onPaired();
    } catch (err) {
      setProblem(pairErrorText(err));
      setBusy(false);
    }
  };
  return (
    <main class="welcome">
      <h1>jucode</h1>
      <div aria-live="assertive">
        {problem && (
          <p class="banner error" role="alert" data-testid="pair-error">
            {problem}
          </p>
        )}
      </div>
      <p>
        On the computer that runs the daemon, <code>jucode-daemon open</code> opens this page signed in. To use a phone,
        open Settings there, choose <b>Pair a phone</b>, and scan the QR code or type the code here.
      </p>
      <form class="pair-form" onSubmit={submit}>
        <label for="pair-code">Pairing code</label>
        <div class="pair-row">
          <input
            id="pair-code"
            autocomplete="one-time-code"
            autocapitalize="characters"
            spellcheck={false}
            inputMode="text"
            maxLength={12}
            placeholder="8 characters"
            aria-describedby="pair-hint"
            aria-invalid={problem ? true : undefined}
            value={code}
            onInput={(e) => setCode(tidyCode(e.currentTarget.value))}
          />
          <button type="submit" disabled={busy}>
            {busy ? "Pairing…" : "Pair"}
          </button>
        </div>
        <p id="pair-hint" class="hint">
          A code lasts 5 minutes and works once.
        </p>
      </form>
    </main>
  );
}
