// A block of markdown, rendered safely (core/markdown.ts).
import { useMemo } from "preact/hooks";
import { renderMarkdown } from "../core/markdown";

export function Markdown({ text, class: cls }: { text: string; class?: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div class={`md ${cls ?? ""}`} dangerouslySetInnerHTML={{ __html: html }} />;
}
