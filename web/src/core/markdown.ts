// Markdown from models, tools and agents, made safe to draw. Everything it renders is hostile
// input: raw HTML is shown as text (never parsed), links keep only http(s) and mailto targets
// and open in a new tab without a referrer, images become links (a remote image is a beacon),
// and DOMPurify checks the result once more against a short list of tags.
import { Marked, type Tokens } from "marked";
import DOMPurify from "dompurify";

const SAFE_URL = /^(https?:|mailto:)/i;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

/** The target if it is one we let a person follow, else null. */
export function safeHref(href: string | null | undefined): string | null {
  if (!href) return null;
  // Browsers ignore control characters and spaces inside a scheme: strip before checking.
  const compact = href.replace(/[\u0000-\u0020\u007f-\u009f]/g, "");
  return SAFE_URL.test(compact) ? compact : null;
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return escapeHtml(text);
    },
    link({ href, title, tokens }: Tokens.Link) {
      const inner = this.parser.parseInline(tokens);
      const safe = safeHref(href);
      if (!safe) return inner;
      const t = title ? ` title="${escapeHtml(title)}"` : "";
      return `<a href="${escapeHtml(safe)}"${t}>${inner}</a>`;
    },
    image({ href, text }: Tokens.Image) {
      const safe = safeHref(href);
      const label = escapeHtml(text || "image");
      return safe ? `<a href="${escapeHtml(safe)}">[${label}]</a>` : `[${label}]`;
    },
  },
});

const ALLOWED_TAGS = [
  "a", "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote",
  "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6",
  "table", "thead", "tbody", "tr", "th", "td", "input", "span",
];

let hooked = false;
function hook(): void {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") {
      const safe = safeHref(node.getAttribute("href"));
      if (safe) node.setAttribute("href", safe);
      else node.removeAttribute("href");
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
    if (node.tagName === "INPUT") {
      // GFM task-list boxes only, and never live.
      if (node.getAttribute("type") !== "checkbox") node.remove();
      else node.setAttribute("disabled", "");
    }
  });
}

/** Markdown to sanitised HTML, for `dangerouslySetInnerHTML` (the only sanctioned use). */
export function renderMarkdown(source: string): string {
  hook();
  const html = marked.parse(source) as string;
  return DOMPurify.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR: ["href", "title", "type", "checked", "disabled", "align", "start"],
    ALLOW_DATA_ATTR: false,
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  });
}
