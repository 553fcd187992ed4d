// term.js: xterm and its fit addon, built as a bundle of its own (see build.mjs).
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import type { TermHandle, TermModule, TermOptions } from "./api";

// The page's policy allows no <style> elements (each would be blocked and reported), and
// xterm writes its grid's dimensions and colours into some. So the style elements it asks for
// are inert, hidden stand-ins whose text is mirrored into a constructed sheet (CSSOM), which
// the policy allows. Nothing else on the page makes style elements.
const STANDIN = "xterm-style";
const createElement = document.createElement.bind(document);
document.createElement = ((tag: string, options?: ElementCreationOptions) => {
  if (tag.toLowerCase() !== "style") return createElement(tag, options);
  const standin = createElement(STANDIN);
  standin.hidden = true;
  return standin;
}) as typeof document.createElement;

function mirrorStyles(el: HTMLElement): () => void {
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  const copy = () => {
    const text = Array.from(el.querySelectorAll(STANDIN))
      .map((s) => s.textContent ?? "")
      .join("\n");
    sheet.replaceSync(text);
  };
  const seen = new MutationObserver(copy);
  seen.observe(el, { childList: true, subtree: true, characterData: true });
  copy();
  return () => {
    seen.disconnect();
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
  };
}

function theme(el: HTMLElement) {
  const css = getComputedStyle(el);
  const v = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback;
  return {
    background: v("--term-bg", "#101215"),
    foreground: v("--term-fg", "#e7e9ee"),
    cursor: v("--accent", "#6aa7ec"),
    selectionBackground: v("--term-sel", "#3a4660"),
  };
}

export const createTerminal: TermModule["createTerminal"] = (el: HTMLElement, o: TermOptions): TermHandle => {
  const unmirror = mirrorStyles(el);
  const term = new Terminal({
    cursorBlink: true,
    fontFamily: getComputedStyle(el).getPropertyValue("--mono").trim() || "monospace",
    fontSize: 14,
    scrollback: 5000,
    theme: theme(el),
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(el);
  term.onData(o.onData);
  term.onResize(({ cols, rows }) => o.onResize(cols, rows));
  const doFit = () => {
    try {
      fit.fit();
    } catch {
      // Not laid out yet (hidden): keep the size it had.
    }
    return { cols: term.cols, rows: term.rows };
  };
  doFit();
  return {
    write: (bytes) => term.write(bytes),
    fit: doFit,
    focus: () => term.focus(),
    dispose: () => {
      term.dispose();
      unmirror();
    },
  };
};
