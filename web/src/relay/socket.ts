// A relay stream as a transport: one WebSocket to `<relay>/relay/v1/connect?host=<id>`, the
// Noise IK handshake, then each daemon frame as chunked Noise transport messages both ways.
import type { CloseInfo, CloseKind, Opener, Transport } from "../core/transport";
import { Channel, NoiseError, initiator } from "./noise";
import { helloPayload, markPaired, type RelaySetup } from "./pairing";

export const HANDSHAKE_TIMEOUT_MS = 15_000;

/** The daemon's answer in msg2. */
interface Msg2 {
  ok?: unknown;
  device?: unknown;
  name?: unknown;
  error?: unknown;
}

/** The relay's close codes, in the page's terms. */
export function closeKind(code: number): CloseKind {
  switch (code) {
    case 4404:
      return "offline";
    case 4429:
      return "busy";
    case 4401:
      return "revoked";
    case 4400:
    case 1009:
      return "protocol";
    default:
      // 4410 (the daemon closed the stream), 1000 idle, 1006 the network: try again.
      return "dropped";
  }
}

function closeReason(code: number, reason: string): string {
  switch (code) {
    case 4404:
      return "the computer is not connected to the relay";
    case 4429:
      return "the relay has too many connections to this computer";
    case 4410:
      return "the daemon closed the relay stream";
    case 4400:
      return "the relay says this page broke its protocol";
    case 1009:
      return "a message was too large for the relay";
    default:
      return reason || "the relay connection was lost";
  }
}

/**
 * What a refused handshake means: a device the daemon knew and now does not (we sent no code
 * because it had accepted us before) was revoked; anything else is a refusal.
 */
export function refusal(s: RelaySetup, sentCode: boolean, error: string): CloseInfo {
  const known = !sentCode && s.host.device !== undefined;
  return { kind: known ? "revoked" : "refused", code: 0, reason: error };
}

export interface RelayOpenerOptions {
  /** Makes the socket; tests and the page pass the browser's WebSocket. */
  socket?: (url: string) => WebSocket;
  handshakeTimeoutMs?: number;
  /** Where the host record is kept (localStorage in the page). */
  storage?: Storage;
}

export function connectUrl(s: RelaySetup): string {
  return `${s.host.relay.replace(/\/+$/, "")}/connect?host=${encodeURIComponent(s.host.host_id)}`;
}

export function relayOpener(setup: RelaySetup, options: RelayOpenerOptions = {}): Opener {
  const makeSocket = options.socket ?? ((url: string) => new WebSocket(url));
  const timeoutMs = options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS;
  return (events) =>
    new Promise<Transport>((resolve, reject) => {
      const ws = makeSocket(connectUrl(setup));
      ws.binaryType = "arraybuffer";
      const hs = initiator(setup.device, setup.hostKey);
      const sentCode = setup.code !== null;
      const encoder = new TextEncoder();
      const decoder = new TextDecoder("utf-8", { fatal: true });
      let channel: Channel | null = null;
      // Set once: the first ending wins, and a close we asked for reports nothing.
      let ended = false;
      let opened = false;
      const timer = setTimeout(() => fail({ kind: "dropped", code: 0, reason: "the relay handshake timed out" }), timeoutMs);

      /** Ends the stream and tells whoever is waiting: the opener's caller, or the connection. */
      function fail(info: CloseInfo): void {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        // A frame half received is dropped with the channel, never parsed.
        channel = null;
        try {
          ws.close(1000);
        } catch {
          // already closed
        }
        if (opened) events.close(info);
        else reject(info);
      }

      ws.onopen = () => {
        try {
          ws.send(hs.writeMessage(helloPayload(setup)));
        } catch (e) {
          fail({ kind: "protocol", code: 0, reason: `the relay handshake failed: ${(e as Error).message}` });
        }
      };

      ws.onmessage = (e: MessageEvent) => {
        if (ended) return;
        if (!(e.data instanceof ArrayBuffer)) {
          fail({ kind: "protocol", code: 0, reason: "the relay sent a text message" });
          return;
        }
        const bytes = new Uint8Array(e.data);
        if (!channel) {
          onMsg2(bytes);
          return;
        }
        let frame: Uint8Array | null;
        try {
          frame = channel.open(bytes);
        } catch (err) {
          // Tampered, dropped, repeated or reordered: this stream is over; a new one re-handshakes.
          fail({ kind: "dropped", code: 0, reason: `a relay message did not decrypt (${(err as Error).message})` });
          return;
        }
        if (!frame) return;
        let text: string;
        try {
          text = decoder.decode(frame);
        } catch {
          fail({ kind: "dropped", code: 0, reason: "a relay frame was not UTF-8" });
          return;
        }
        events.message(text);
      };

      function onMsg2(bytes: Uint8Array): void {
        let reply: Msg2;
        try {
          const payload = hs.readMessage(bytes);
          reply = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload)) as Msg2;
        } catch (err) {
          const why = err instanceof NoiseError ? err.message : "its answer was not JSON";
          fail({ kind: "protocol", code: 0, reason: `the daemon's handshake reply was not valid: ${why}` });
          return;
        }
        if (!reply || reply.ok !== true) {
          const error = typeof reply?.error === "string" ? reply.error : "the daemon refused this device";
          fail(refusal(setup, sentCode, error));
          return;
        }
        if (typeof reply.device === "string") markPaired(setup, reply.device, options.storage);
        else setup.code = null;
        channel = Channel.from(hs.split());
        clearTimeout(timer);
        opened = true;
        const ch = channel;
        resolve({
          send: (text) => {
            if (ended || channel !== ch || ws.readyState !== 1 /* OPEN */) return;
            for (const m of ch.seal(encoder.encode(text))) ws.send(m);
          },
          close: () => {
            if (ended) return;
            ended = true;
            channel = null;
            ws.close(1000);
          },
        });
      }

      ws.onclose = (e: CloseEvent) => {
        fail({ kind: closeKind(e.code), code: e.code, reason: closeReason(e.code, e.reason) });
      };
    });
}
