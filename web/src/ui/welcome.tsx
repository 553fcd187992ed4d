// What a page with no way in yet shows: how to get one.
import { useState } from "preact/hooks";

export function Welcome({ error }: { error?: string }) {
  const [code, setCode] = useState("");
  return (
    <main class="welcome">
      <h1>jucode</h1>
      {error && (
        <p class="banner error" role="alert">
          {error}
        </p>
      )}
      <p>
        On the computer that runs the daemon, <code>jucode-daemon open</code> opens this page signed in. To use a phone,
        show a pairing code on the desktop and type it here.
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (code.trim()) location.assign(`/remote?pair=${encodeURIComponent(code.trim())}`);
        }}
      >
        <label for="pair-code">Pairing code</label>
        <input
          id="pair-code"
          autocomplete="one-time-code"
          autocapitalize="characters"
          value={code}
          onInput={(e) => setCode(e.currentTarget.value)}
        />
        <button type="submit">Pair</button>
      </form>
    </main>
  );
}
