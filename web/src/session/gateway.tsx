// The JuCode gateway switch of a Claude Code or Codex session: `set_gateway`, the daemon
// restarts the engine once its turn ends; the checkbox follows the list's `gateway` flag.
import { useState } from "preact/hooks";
import { request } from "../core/daemon";
import "./gateway.css";

export function GatewaySwitch({ id, on }: { id: string; on: boolean }) {
  const [problem, setProblem] = useState("");
  const [busy, setBusy] = useState(false);
  const change = async (gateway: boolean) => {
    setBusy(true);
    setProblem("");
    try {
      await request("set_gateway", { session: id, gateway });
    } catch (e) {
      setProblem((e as Error)?.message ?? String(e));
    }
    setBusy(false);
  };
  return (
    <label class="gateway" title={problem || "Run this session through the JuCode gateway"}>
      <input
        type="checkbox"
        checked={on}
        disabled={busy}
        aria-describedby={problem ? `gw-${id}` : undefined}
        onChange={(e) => void change(e.currentTarget.checked)}
      />
      <span>Gateway</span>
      {problem && (
        <span id={`gw-${id}`} class="sr-only" role="alert">
          {problem}
        </span>
      )}
    </label>
  );
}
