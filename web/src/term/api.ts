// The contract between the page and term.js, the xterm bundle loaded only when a terminal
// opens (it is most of a terminal's weight, and most visits never open one).

export interface TermOptions {
  /** Keystrokes and pastes, as the terminal encodes them. */
  onData(data: string): void;
  /** The grid changed size (after a fit). */
  onResize(cols: number, rows: number): void;
}

export interface TermHandle {
  write(bytes: Uint8Array): void;
  /** Fits the grid to its element; returns the size. */
  fit(): { cols: number; rows: number };
  focus(): void;
  dispose(): void;
}

export interface TermModule {
  createTerminal(el: HTMLElement, options: TermOptions): TermHandle;
}
