// A unified diff drawn as text lines, added and removed ones coloured. A long diff is drawn a
// window at a time so a phone stays responsive.
import { useMemo, useState } from "preact/hooks";
import { parseDiff } from "./model";

/** Lines drawn at first, and added by each "show more". */
const WINDOW = 1500;

export function Diff({ text, truncated }: { text: string; truncated: boolean }) {
  const files = useMemo(() => parseDiff(text), [text]);
  const [limit, setLimit] = useState(WINDOW);
  if (!text) return <p class="empty">No changes.</p>;
  let budget = limit;
  let hidden = 0;
  const blocks = files.map((f, i) => {
    const shown = f.lines.slice(0, Math.max(0, budget));
    hidden += f.lines.length - shown.length;
    budget -= shown.length;
    return (
      <section key={`${i}:${f.file}`} class="diff-file" aria-label={`Changes to ${f.file || "a file"}`}>
        <h3>
          <span class="name">{f.file}</span>
          <span class="counts">
            <span class="plus">+{f.added}</span> <span class="minus">−{f.removed}</span>
          </span>
        </h3>
        {shown.length > 0 && (
          <pre class="diff" tabIndex={0}>
            {shown.map((l, j) => (
              <span key={j} class={`dl d-${l.kind}`}>
                {l.text}
                {"\n"}
              </span>
            ))}
          </pre>
        )}
      </section>
    );
  });
  return (
    <div class="diff-view">
      {truncated && <p class="notice info">The diff is longer than 1 MB: only its start is shown.</p>}
      {blocks}
      {hidden > 0 && (
        <button type="button" onClick={() => setLimit((l) => l + WINDOW)}>
          Show {Math.min(hidden, WINDOW)} more lines ({hidden} hidden)
        </button>
      )}
    </div>
  );
}
