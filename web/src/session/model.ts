// A session's live state, folded from its events. Pure (no DOM), so the unit tests drive it
// with the frames the daemon sends. Items are immutable: a change makes a new item object,
// so the list redraws only what changed; the array itself is copied (5,000 pointers is cheap).

export interface Hunk {
  id: string;
  file: string;
  header: string;
  lines: string[];
}

export type Item =
  | { k: "user"; key: number; text: string; images: string[] }
  | { k: "assistant"; key: number; text: string; live: boolean }
  | { k: "reasoning"; key: number; text: string; live: boolean }
  | { k: "tool"; key: number; callId: string; name: string; output: string; isError: boolean; done: boolean }
  | { k: "notice"; key: number; level: "info" | "error"; text: string }
  | { k: "branch"; key: number; label: string };

export interface Approval {
  callId: string;
  name: string;
  summary: string;
  hunks: Hunk[] | null;
  /** Scopes an `always` answer may name (`always_scope`); empty: a plain `always`. */
  scopes: string[];
  subagent: string | null;
}

export interface Command {
  command: string;
  args: string;
  description: string;
}

export interface SessionState {
  items: Item[];
  approvals: Approval[];
  busy: boolean;
  pending: string[];
  commands: Command[];
  model: Record<string, unknown> | null;
  mode: string;
  modePending: string | null;
  attended: boolean | null;
  /** The latest `status` other than `ready`, cleared at the end of a turn. */
  status: string;
  contextTokens: number | null;
}

export function emptyState(): SessionState {
  return {
    items: [],
    approvals: [],
    busy: false,
    pending: [],
    commands: [],
    model: null,
    mode: "",
    modePending: null,
    attended: null,
    status: "",
    contextTokens: null,
  };
}

let nextKey = 1;
const key = () => nextKey++;

const str = (v: unknown): string => (typeof v === "string" ? v : v == null ? "" : String(v));

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
}

export function parseHunks(v: unknown): Hunk[] | null {
  if (!Array.isArray(v)) return null;
  const out: Hunk[] = [];
  for (const h of v) {
    if (!h || typeof h !== "object") continue;
    const o = h as Record<string, unknown>;
    out.push({ id: str(o.id), file: str(o.file), header: str(o.header), lines: strings(o.lines) });
  }
  return out;
}

/** One transcript item as the daemon sends it, or null for a shape we do not know. */
export function fromTranscript(raw: unknown): Item | null {
  if (!raw || typeof raw !== "object") return null;
  const o = raw as Record<string, unknown>;
  switch (o.role) {
    case "user":
      return { k: "user", key: key(), text: str(o.content), images: strings(o.images) };
    case "assistant":
      return { k: "assistant", key: key(), text: str(o.content), live: false };
    case "tool":
      return { k: "tool", key: key(), callId: "", name: str(o.name), output: str(o.output), isError: false, done: true };
    case "branch":
      return { k: "branch", key: key(), label: str(o.label) };
    default:
      return null;
  }
}

/** Ends whatever is streaming (a new message, a tool call or the end of the turn). */
function settle(items: Item[]): Item[] {
  let changed = false;
  const out = items.slice();
  // Only the tail can be live; look back a little.
  for (let i = out.length - 1; i >= Math.max(0, out.length - 8); i--) {
    const it = out[i]!;
    if ((it.k === "assistant" || it.k === "reasoning") && it.live) {
      out[i] = { ...it, live: false };
      changed = true;
    }
  }
  return changed ? out : items;
}

function appendText(items: Item[], kind: "assistant" | "reasoning", delta: string): Item[] {
  const last = items[items.length - 1];
  if (last && last.k === kind && last.live) {
    const out = items.slice();
    out[out.length - 1] = { ...last, text: last.text + delta };
    return out;
  }
  return [...settle(items), { k: kind, key: key(), text: delta, live: true }];
}

function findTool(items: Item[], callId: string): number {
  if (!callId) return -1;
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i]!;
    if (it.k === "tool" && it.callId === callId) return i;
  }
  return -1;
}

function dropApproval(s: SessionState, callId: string): Approval[] {
  return s.approvals.some((a) => a.callId === callId) ? s.approvals.filter((a) => a.callId !== callId) : s.approvals;
}

/**
 * `s` after the session event `f`. Returns `s` itself when nothing changed. An empty
 * `transcript` does not wipe what is drawn: a hosted session's conversation never shrinks to
 * nothing (`/clear` is refused), but the snapshot of a session the daemon has not run since
 * it restarted is empty until the engine's own transcript arrives.
 */
export function reduce(s: SessionState, f: Record<string, unknown>): SessionState {
  switch (f.type) {
    case "transcript": {
      const raw = Array.isArray(f.items) ? f.items : [];
      if (raw.length === 0 && s.items.length > 0) return s;
      const items: Item[] = [];
      for (const r of raw) {
        const it = fromTranscript(r);
        if (it) items.push(it);
      }
      // A snapshot re-sends the open approvals and `connecting` after its transcript.
      return { ...s, items, approvals: [], busy: false, status: "" };
    }
    case "user_message":
      return {
        ...s,
        busy: true,
        items: [...settle(s.items), { k: "user", key: key(), text: str(f.content), images: strings(f.images) }],
      };
    case "connecting":
      return s.busy ? s : { ...s, busy: true };
    case "thinking_start": {
      const last = s.items[s.items.length - 1];
      if (last && last.k === "reasoning" && last.live) return s;
      return { ...s, busy: true, items: [...settle(s.items), { k: "reasoning", key: key(), text: "", live: true }] };
    }
    case "reasoning_delta":
      return { ...s, items: appendText(s.items, "reasoning", str(f.delta)) };
    case "assistant_start": {
      const last = s.items[s.items.length - 1];
      if (last && last.k === "assistant" && last.live && last.text === "") return s;
      return { ...s, busy: true, items: [...settle(s.items), { k: "assistant", key: key(), text: "", live: true }] };
    }
    case "assistant_delta":
      return { ...s, items: appendText(s.items, "assistant", str(f.delta)) };
    case "tool_start": {
      const callId = str(f.call_id);
      const approvals = dropApproval(s, callId);
      const at = findTool(s.items, callId);
      if (at >= 0 && !(s.items[at] as { done: boolean }).done) return { ...s, approvals };
      const tool: Item = { k: "tool", key: key(), callId, name: str(f.name), output: "", isError: false, done: false };
      return { ...s, approvals, items: [...settle(s.items), tool] };
    }
    case "tool_update":
    case "tool_output": {
      const callId = str(f.call_id);
      const done = f.type === "tool_output";
      const approvals = done ? dropApproval(s, callId) : s.approvals;
      const at = findTool(s.items, callId);
      const prev = at >= 0 ? s.items[at] : null;
      if (prev && prev.k === "tool" && !prev.done) {
        const items = s.items.slice();
        items[at] = {
          ...prev,
          name: str(f.name) || prev.name,
          output: str(f.output),
          isError: done ? f.is_error === true : prev.isError,
          done,
        };
        return { ...s, approvals, items };
      }
      const tool: Item = { k: "tool", key: key(), callId, name: str(f.name), output: str(f.output), isError: f.is_error === true, done };
      return { ...s, approvals, items: [...settle(s.items), tool] };
    }
    case "approval_request": {
      const a: Approval = {
        callId: str(f.call_id),
        name: str(f.name),
        summary: str(f.summary),
        hunks: parseHunks(f.hunks),
        scopes: strings(f.scopes),
        subagent: typeof f.subagent_id === "string" ? f.subagent_id : null,
      };
      return { ...s, approvals: [...s.approvals.filter((x) => x.callId !== a.callId), a] };
    }
    case "action_deferred":
      return {
        ...s,
        approvals: dropApproval(s, str(f.call_id)),
        items: [...s.items, { k: "notice", key: key(), level: "info", text: `Deferred for a decision later: ${str(f.name)} (${str(f.summary)})` }],
      };
    case "action_decided":
      return {
        ...s,
        items: [...s.items, { k: "notice", key: key(), level: "info", text: `Action ${str(f.id)}: ${f.decision === "allow" ? "allowed" : "denied"}` }],
      };
    case "pending_messages":
      return { ...s, pending: strings(f.messages) };
    case "status": {
      const m = str(f.message);
      if (m === "ready") return { ...s, busy: false, status: "", approvals: [], items: settle(s.items) };
      if (m === "interrupted") return { ...s, status: m, approvals: [] };
      // The mode selector shows the mode; "streaming" says nothing the state line does not.
      if (m.startsWith("approval mode") || m === "streaming") return s.status ? { ...s, status: "" } : s;
      return { ...s, status: m };
    }
    case "info":
    case "error":
      return { ...s, items: [...s.items, { k: "notice", key: key(), level: f.type, text: str(f.message) }] };
    case "model_status":
      return { ...s, model: f };
    case "command_list": {
      const commands: Command[] = [];
      if (Array.isArray(f.commands))
        for (const c of f.commands) {
          if (!c || typeof c !== "object") continue;
          const o = c as Record<string, unknown>;
          const command = str(o.command);
          if (command) commands.push({ command, args: str(o.args), description: str(o.description) });
        }
      return { ...s, commands };
    }
    case "approval_mode":
      return { ...s, mode: str(f.mode) };
    case "approval_mode_pending":
      return { ...s, modePending: typeof f.mode === "string" ? f.mode : null };
    case "attended":
      return { ...s, attended: f.attended === true };
    case "context_usage":
      return { ...s, contextTokens: typeof f.tokens === "number" ? f.tokens : s.contextTokens };
    case "session_closed":
      return { ...s, busy: false, approvals: [], status: "", items: settle(s.items) };
    default:
      return s;
  }
}

/** Splits markdown at blank lines outside code fences, so a streaming answer re-parses only
 *  its last block (the blocks before it keep their rendered HTML). */
export function splitBlocks(text: string): string[] {
  const out: string[] = [];
  let fence: string | null = null;
  let start = 0;
  let pos = 0;
  while (pos <= text.length) {
    let end = text.indexOf("\n", pos);
    if (end < 0) end = text.length;
    const line = text.slice(pos, end);
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === null) fence = m[1]!;
      else if (m[1]![0] === fence[0] && m[1]!.length >= fence.length && line.trim() === m[1]) fence = null;
    } else if (fence === null && line.trim() === "" && pos > start) {
      out.push(text.slice(start, pos));
      start = end + 1;
    }
    if (end >= text.length) break;
    pos = end + 1;
  }
  if (start < text.length) out.push(text.slice(start));
  return out.filter((b) => b.trim() !== "");
}

/** Whether tool output reads as a unified diff (so its lines get +/- colours). */
export function looksLikeDiff(text: string): boolean {
  return /^@@ .* @@/m.test(text) || (/^--- /m.test(text) && /^\+\+\+ /m.test(text));
}

/** The class of one diff line. */
export function diffClass(line: string): "add" | "del" | "hunk" | "" {
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+++") || line.startsWith("---")) return "";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "";
}

/** Commands whose name starts with what follows the `/` (the first word only). */
export function matchCommands(commands: Command[], input: string): Command[] {
  if (!input.startsWith("/") || /\s/.test(input)) return [];
  const q = input.toLowerCase();
  return commands.filter((c) => c.command.toLowerCase().startsWith(q)).slice(0, 20);
}
