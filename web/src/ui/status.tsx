// The connection banner: what the page can and cannot do right now, said plainly.
import { useEffect, useState } from "preact/hooks";
import { connection } from "../core/daemon";
import { forgetAll } from "../core/auth";
import { useStore } from "../core/store";

export function StatusBanner() {
  const conn = useStore((s) => s.conn);
  const restarting = useStore((s) => s.restarting);
  const [, tick] = useState(0);
  useEffect(() => {
    if (conn.kind !== "reconnecting") return;
    const t = setInterval(() => tick((n) => n + 1), 1000);
    return () => clearInterval(t);
  }, [conn]);
  switch (conn.kind) {
    case "open":
      return restarting ? (
        <div class="banner warn" role="status" data-state="restarting">
          The daemon is restarting once the running turns end. This page reconnects by itself.
        </div>
      ) : null;
    case "connecting":
      return (
        <div class="banner" role="status" data-state="connecting">
          Connecting…
        </div>
      );
    case "reconnecting": {
      const secs = Math.max(0, Math.ceil((conn.at - Date.now()) / 1000));
      return (
        <div class="banner warn" role="status" data-state="reconnecting">
          {restarting ? "The daemon is restarting" : `Offline: ${conn.why}`}. Trying again {secs > 0 ? `in ${secs} s` : "now"}.{" "}
          <button type="button" onClick={() => connection()?.retryNow()}>
            Retry now
          </button>
        </div>
      );
    }
    case "stopped":
      return (
        <div class="banner error" role="alert" data-state={conn.why}>
          {conn.why === "revoked"
            ? "This device was revoked on the computer. Pair it again to reconnect."
            : conn.why === "refused"
              ? "The daemon refused this page's token. Open a new link from `jucode-daemon open`, or pair again."
              : conn.why === "incompatible"
                ? `This page cannot talk to this daemon: ${conn.message}.`
                : conn.why === "offline"
                  ? "The computer is not connected to the relay."
                  : `Disconnected: ${conn.message}`}{" "}
          {(conn.why === "revoked" || conn.why === "refused") && (
            <button
              type="button"
              onClick={() => {
                forgetAll();
                location.assign("/remote");
              }}
            >
              Forget this computer
            </button>
          )}
        </div>
      );
  }
}
