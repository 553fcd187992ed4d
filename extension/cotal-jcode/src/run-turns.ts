/**
 * Workflow run turns on a jcode seat (the spec's "A run turn rides the message that starts a
 * Cotal-owned turn"). A run turn the manager hands the seat is not a turn of its own: it rides
 * the text of the next turn the seat starts through the Harness API. It counts as shown once the
 * Harness accepts that message, and only then can the agent settle it with `cotal_yield`; a send
 * the Harness never accepts leaves it unshown, and the next Cotal-owned turn carries it again.
 *
 * The seat keeps this ledger (`jucode_cotal::runturn`); this is the same rule for the manager's
 * side of the seat, so a manager or a test can tell which `cotal_yield` a seat may send. Both are
 * run against `test/fixtures/run-turns.json`.
 */

/** One workflow run turn addressed to the seat. */
export interface RunTurn {
  /** The turn id `cotal_yield` names. */
  turn: string;
  run: string;
  step: string;
  /** What the step asks of the agent. */
  text: string;
}

type State = { turn: RunTurn; shown: boolean; carriedBy?: number };

/** The ledger: offered, carried, shown, settled. */
export class RunTurnLedger {
  private turns = new Map<string, State>();
  private settled = new Set<string>();

  /** The manager handed the seat a run turn; a repeat or a settled one is ignored. */
  offer(turn: RunTurn): boolean {
    if (this.settled.has(turn.turn) || this.turns.has(turn.turn)) return false;
    this.turns.set(turn.turn, { turn, shown: false });
    return true;
  }

  /**
   * The seat is about to send the message that starts Cotal-owned turn `send`: every unshown
   * run turn not already riding another send rides this one. Returns the block to append.
   */
  carry(send: number): string | undefined {
    const riding = [...this.turns.values()].filter((s) => !s.shown && s.carriedBy === undefined);
    if (!riding.length) return undefined;
    for (const s of riding) s.carriedBy = send;
    return riding.map((s) => block(s.turn)).join("\n\n");
  }

  /** The Harness accepted send `send`: what rode it is shown. */
  accepted(send: number): string[] {
    const shown: string[] = [];
    for (const s of this.turns.values())
      if (s.carriedBy === send) {
        s.shown = true;
        delete s.carriedBy;
        shown.push(s.turn.turn);
      }
    return shown;
  }

  /** Send `send` was never accepted (refused, or the connection closed first): still unshown. */
  notAccepted(send: number): void {
    for (const s of this.turns.values()) if (s.carriedBy === send) delete s.carriedBy;
  }

  /** May the agent settle `turn` now? `undefined` when it may, else why not. */
  yieldRefusal(turn: string): string | undefined {
    if (this.settled.has(turn)) return `run turn ${turn} is already settled`;
    const s = this.turns.get(turn);
    if (!s) return `run turn ${turn} was never given to this seat`;
    if (!s.shown) return `run turn ${turn} has not been shown yet: it rides the next turn`;
    return undefined;
  }

  /** The manager took the yield for `turn`. */
  settle(turn: string): void {
    this.turns.delete(turn);
    this.settled.add(turn);
  }

  /** Shown and not settled: what ending the host turn auto-yields as `done`. */
  openShown(): string[] {
    return [...this.turns.values()].filter((s) => s.shown).map((s) => s.turn.turn);
  }

  unshown(): string[] {
    return [...this.turns.values()].filter((s) => !s.shown).map((s) => s.turn.turn);
  }
}

/**
 * The control-socket line that hands the seat a run turn (one NDJSON frame per connection on the
 * socket `LaunchSpec.control` names, with the launch's control token). The seat answers
 * `{"ok":true}` once the turn is queued for it; a repeat or a settled turn is ignored there.
 */
export function runTurnFrame(token: string, turn: RunTurn): string {
  for (const k of ["turn", "run", "step", "text"] as const)
    if (typeof turn[k] !== "string" || !turn[k]) throw new Error(`run turn: ${k} must be a non-empty string`);
  const { turn: id, run, step, text } = turn;
  return `${JSON.stringify({ token, op: "run-turn", turn: { turn: id, run, step, text } })}\n`;
}

/** The text a run turn adds to the message it rides. */
export function block(t: RunTurn): string {
  return `🧭 Cotal — workflow run turn ${t.turn} (run ${t.run}, step ${t.step}):\n${t.text}\nSettle it with cotal_yield {"turn": "${t.turn}", "status": "done" | "blocked" | "handoff"}.`;
}
