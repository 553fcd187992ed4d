// A windowed list: only the rows near the viewport are in the DOM, the rest are two spacers
// whose heights come from measured rows (estimated until seen). It keeps the view still when
// rows above it change height, and follows the bottom only while the reader is at the bottom.
import type { ComponentChildren } from "preact";
import { useLayoutEffect, useRef, useState } from "preact/hooks";

interface Props<T> {
  items: T[];
  keyOf: (t: T) => number;
  render: (t: T) => ComponentChildren;
  label: string;
  /** Height assumed for a row not yet measured. */
  estimate?: number;
  /** Pixels drawn beyond the viewport, above and below. */
  overscan?: number;
  /** Told when the reader leaves or reaches the bottom. */
  onPinned?: (pinned: boolean) => void;
  /** Set by the list: scrolls to the bottom and follows it again. */
  control?: { toBottom?: () => void };
}

const PIN_SLACK = 48;

function lowerBound(off: Float64Array, n: number, y: number): number {
  // The first row whose bottom (off[i+1]) is past y.
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (off[mid + 1]! > y) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

export function VList<T>({ items, keyOf, render, label, estimate = 80, overscan = 900, onPinned, control }: Props<T>) {
  const scroller = useRef<HTMLDivElement>(null);
  const heights = useRef(new Map<number, number>());
  const pinned = useRef(true);
  const view = useRef({ top: 0, height: 700 });
  const anchor = useRef(0);
  const shift = useRef(0);
  const observed = useRef(new Set<Element>());
  const [, setTick] = useState(0);
  const redraw = () => setTick((t) => (t + 1) & 0xffff);

  const ro = useRef<ResizeObserver | null>(null);
  if (!ro.current && typeof ResizeObserver !== "undefined")
    ro.current = new ResizeObserver((entries) => {
      let changed = false;
      for (const e of entries) {
        const el = e.target as HTMLElement;
        if (el === scroller.current) {
          view.current.height = el.clientHeight;
          changed = true;
          continue;
        }
        const k = Number(el.dataset.key);
        const h = el.offsetHeight;
        const old = heights.current.get(k);
        if (old === h) continue;
        heights.current.set(k, h);
        changed = true;
        // A row above the one at the top of the view grew or shrank: move with it.
        if (!pinned.current && Number(el.dataset.index) < anchor.current) shift.current += h - (old ?? estimate);
      }
      if (changed) redraw();
    });

  const n = items.length;
  const off = new Float64Array(n + 1);
  for (let i = 0; i < n; i++) off[i + 1] = off[i]! + (heights.current.get(keyOf(items[i]!)) ?? estimate);
  const { top, height } = view.current;
  const start = Math.max(0, lowerBound(off, n, top - overscan));
  let end = lowerBound(off, n, top + height + overscan) + 1;
  if (end > n) end = n;
  anchor.current = lowerBound(off, n, top);

  const toBottom = () => {
    const el = scroller.current;
    if (!el) return;
    pinned.current = true;
    onPinned?.(true);
    el.scrollTop = el.scrollHeight;
    view.current.top = el.scrollTop;
    redraw();
  };
  if (control) control.toBottom = toBottom;

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const obs = ro.current;
    if (obs) {
      const now = new Set<Element>();
      for (const child of Array.from(el.querySelectorAll(":scope > .vrows > [data-key]"))) {
        now.add(child);
        if (!observed.current.has(child)) obs.observe(child);
      }
      for (const old of observed.current) if (!now.has(old)) obs.unobserve(old);
      observed.current = now;
    }
    if (shift.current !== 0) {
      el.scrollTop += shift.current;
      shift.current = 0;
      view.current.top = el.scrollTop;
    }
    if (pinned.current && el.scrollHeight - el.scrollTop - el.clientHeight > 1) {
      el.scrollTop = el.scrollHeight;
      view.current.top = el.scrollTop;
    }
  });

  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    view.current.height = el.clientHeight;
    ro.current?.observe(el);
    return () => {
      ro.current?.disconnect();
      observed.current.clear();
    };
  }, []);

  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    view.current = { top: el.scrollTop, height: el.clientHeight };
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < PIN_SLACK;
    if (atBottom !== pinned.current) {
      pinned.current = atBottom;
      onPinned?.(atBottom);
    }
    redraw();
  };

  const rows = [];
  for (let i = start; i < end; i++) {
    const it = items[i]!;
    const k = keyOf(it);
    rows.push(
      <div key={k} data-key={k} data-index={i} data-item="" class="vrow">
        {render(it)}
      </div>,
    );
  }
  return (
    <div class="vscroll" ref={scroller} onScroll={onScroll} role="log" aria-live="off" aria-label={label} tabIndex={0}>
      <div class="vrows" style={{ paddingTop: `${off[start]}px`, paddingBottom: `${off[n]! - off[end]!}px` }}>
        {rows}
      </div>
    </div>
  );
}
