// What a page with no way in yet shows: how to get one, and the pairing code form.
import { useState } from "preact/hooks";
import { forgetAll, pairErrorText, pairWithCode } from "../core/auth";
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

/** What a paired page shows once the computer no longer takes it: revoked while connected
 * (close 1008 "device revoked"), or refused at connect (the browser sees only a failed
 * socket; the daemon's HTTP side answering tells it apart from the daemon being away). */
export function Refused({ why }: { why: "revoked" | "refused" }) {
  return (
    <main class="welcome refused" data-state={why}>
      <h1>jucode</h1>
      <div class="banner error" role="alert">
        <p>
          <b>{why === "revoked" ? "This device was revoked." : "The computer refused this device."}</b>
        </p>
        <p>
          {why === "revoked"
            ? "Someone removed it from the computer's device list, so it was disconnected and cannot reconnect."
            : "Its pairing is no longer accepted: it was revoked, or the computer forgot it."}{" "}
          To use this browser again, forget the old pairing and pair with a new code.
        </p>
      </div>
      <p>
        <button
          type="button"
          class="primary"
          onClick={() => {
            forgetAll();
            location.assign("/remote");
          }}
        >
          Forget and pair again
        </button>
      </p>
    </main>
  );
}
