// A transport carries daemon frames (JSON text) both ways. Two kinds exist: a direct WebSocket
// to the daemon (this file) and a Noise stream through the relay (../relay).

/** Why a transport ended, in terms the page shows. */
export type CloseKind =
  | "dropped" // the network or the daemon went away; try again
  | "revoked" // this device's token or key is no longer accepted
  | "refused" // the daemon answered but would not take this token
  | "offline" // the relay says the computer is not connected
  | "busy" // the relay has too many streams for this computer
  | "protocol"; // something spoke the wrong protocol; trying again will not help

export interface CloseInfo {
  kind: CloseKind;
  code: number;
  reason: string;
}

export interface TransportEvents {
  message(text: string): void;
  close(info: CloseInfo): void;
}

export interface Transport {
  send(text: string): void;
  close(): void;
}

/** Opens a transport; resolves once frames can flow, rejects with a CloseInfo. */
export type Opener = (events: TransportEvents) => Promise<Transport>;

/** The WebSocket URL of the daemon that served this page, with a token in the query. */
export function localSocketUrl(token: string, loc: Location = location): string {
  const scheme = loc.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${loc.host}/?token=${encodeURIComponent(token)}`;
}

/** A direct WebSocket to the daemon. The browser hides a refused upgrade's HTTP 401, so a
 * socket that fails before opening asks the daemon's HTTP side whether it is up: up means the
 * token was refused, down means the daemon is away. */
export function directOpener(token: () => string | null): Opener {
  return (events) =>
    new Promise((resolve, reject) => {
      const t = token();
      if (!t) {
        reject({ kind: "refused", code: 0, reason: "no token" } satisfies CloseInfo);
        return;
      }
      let opened = false;
      const ws = new WebSocket(localSocketUrl(t));
      ws.onopen = () => {
        opened = true;
        resolve({
          send: (text) => ws.readyState === WebSocket.OPEN && ws.send(text),
          close: () => ws.close(1000),
        });
      };
      ws.onmessage = (e) => {
        if (typeof e.data === "string") events.message(e.data);
      };
      ws.onclose = (e) => {
        if (opened) {
          const kind = e.code === 1008 && /revoked/.test(e.reason) ? "revoked" : "dropped";
          events.close({ kind, code: e.code, reason: e.reason });
          return;
        }
        daemonIsUp().then((up) =>
          reject({
            kind: up ? "refused" : "dropped",
            code: e.code,
            reason: up ? "the daemon refused this token" : "the daemon is not reachable",
          } satisfies CloseInfo),
        );
      };
    });
}

async function daemonIsUp(): Promise<boolean> {
  try {
    const r = await fetch("/remote/manifest.webmanifest", { cache: "no-store" });
    return r.ok;
  } catch {
    return false;
  }
}
