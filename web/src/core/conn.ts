// One logical connection to a daemon over whatever transport: request/reply by id, the
// protocol check on `hello`, a ping every minute and reconnection with backoff.
import type { CloseInfo, Opener, Transport } from "./transport";

export type Frame = { type: string; id?: unknown; session?: string; [k: string]: unknown };

export type ConnState =
  | { kind: "connecting"; attempt: number }
  | { kind: "open"; version: string }
  | { kind: "reconnecting"; attempt: number; at: number; why: string }
  | { kind: "stopped"; why: CloseInfo["kind"] | "incompatible"; message: string };

export const PROTOCOL = 2;
const PING_MS = 60_000;
const REQUEST_TIMEOUT_MS = 30_000;
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;

/** An `error` reply, thrown by [`Connection.request`]. */
export class DaemonError extends Error {
  constructor(
    message: string,
    readonly frame: Frame,
  ) {
    super(message);
  }
}

interface Pending {
  resolve(f: Frame): void;
  reject(e: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

export interface ConnHandlers {
  /** Every frame that is not a reply to a request of ours (replies go to their promise). */
  frame(f: Frame): void;
  state(s: ConnState): void;
  /** Called after each `hello`, before any queued frame: restore what was open. */
  opened?(): void;
}

export class Connection {
  private transport: Transport | null = null;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private attempt = 0;
  private stopped = false;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private helloSeen = false;
  state: ConnState = { kind: "connecting", attempt: 0 };

  constructor(
    private readonly opener: Opener,
    private readonly handlers: ConnHandlers,
  ) {}

  start(): void {
    this.stopped = false;
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.drop();
  }

  /** Tries now instead of waiting out the backoff. */
  retryNow(): void {
    if (this.state.kind !== "reconnecting") return;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    void this.connect();
  }

  get isOpen(): boolean {
    return this.state.kind === "open";
  }

  /** Sends an op and resolves with its reply (the frame carrying our id). */
  request(op: string, fields: Record<string, unknown> = {}, timeoutMs = REQUEST_TIMEOUT_MS): Promise<Frame> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (!this.transport || !this.helloSeen) {
        reject(new Error("not connected"));
        return;
      }
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${op}: no answer`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.transport.send(JSON.stringify({ ...fields, op, id }));
    });
  }

  /** Sends an op without waiting for anything. Returns false when not connected. */
  post(op: string, fields: Record<string, unknown> = {}): boolean {
    if (!this.transport || !this.helloSeen) return false;
    this.transport.send(JSON.stringify({ ...fields, op }));
    return true;
  }

  private setState(s: ConnState): void {
    this.state = s;
    this.handlers.state(s);
  }

  private async connect(): Promise<void> {
    this.setState({ kind: "connecting", attempt: this.attempt });
    this.helloSeen = false;
    try {
      this.transport = await this.opener({
        message: (text) => this.onText(text),
        close: (info) => this.onClose(info),
      });
    } catch (e) {
      this.onClose(e as CloseInfo);
    }
  }

  private onText(text: string): void {
    let frame: Frame;
    try {
      frame = JSON.parse(text) as Frame;
    } catch {
      return;
    }
    if (!frame || typeof frame.type !== "string") return;
    if (!this.helloSeen) {
      if (frame.type !== "hello") return;
      if (frame.protocol !== PROTOCOL) {
        this.stopped = true;
        this.drop();
        this.setState({
          kind: "stopped",
          why: "incompatible",
          message: `this daemon speaks protocol ${String(frame.protocol)}; this page speaks ${PROTOCOL}`,
        });
        return;
      }
      this.helloSeen = true;
      this.attempt = 0;
      this.setState({ kind: "open", version: String(frame.version ?? "") });
      this.pingTimer = setInterval(() => this.post("ping"), PING_MS);
      this.handlers.frame(frame);
      this.handlers.opened?.();
      return;
    }
    if (typeof frame.id === "number" && this.pending.has(frame.id)) {
      const p = this.pending.get(frame.id)!;
      this.pending.delete(frame.id);
      clearTimeout(p.timer);
      if (frame.type === "error") p.reject(new DaemonError(String(frame.message ?? "error"), frame));
      else p.resolve(frame);
      return;
    }
    this.handlers.frame(frame);
  }

  private drop(): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
    const t = this.transport;
    this.transport = null;
    this.helloSeen = false;
    t?.close();
    for (const [, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new Error("the connection closed"));
    }
    this.pending.clear();
  }

  private onClose(info: CloseInfo): void {
    this.drop();
    if (this.stopped) return;
    if (info.kind === "revoked" || info.kind === "refused" || info.kind === "protocol") {
      this.stopped = true;
      this.setState({ kind: "stopped", why: info.kind, message: info.reason });
      return;
    }
    this.attempt += 1;
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.min(this.attempt - 1, 10));
    const wait = base / 2 + Math.random() * (base / 2);
    this.setState({ kind: "reconnecting", attempt: this.attempt, at: Date.now() + wait, why: info.reason || info.kind });
    this.retryTimer = setTimeout(() => void this.connect(), wait);
  }
}
