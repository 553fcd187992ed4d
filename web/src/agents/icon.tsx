// An agent's icon: SVG markup (sanitised, drawn as an image), a slug or emoji (text), a
// built-in id, or the agent's initial on its colour.
//
// SVG markup is hostile input. We sanitise it with a DOMPurify instance of our own (so the
// markdown renderer's hooks and ours stay apart) under the SVG profile: no <script>, no
// <foreignObject> (which would bring HTML back in), no <style> (which can @import), no event
// handler attributes, and no reference to anything but a fragment of the same document (href,
// xlink:href and url(...) values that do not start with "#" are dropped). The result is then
// drawn through <img src="data:image/svg+xml,..."> rather than inserted into the page: an
// image context never runs script and never loads sub-resources, so even markup that slipped
// past the sanitiser could not act. The page's CSP allows `img-src data:`.
import DOMPurify from "dompurify";
import { useMemo } from "preact/hooks";
import type { Json } from "../core/store";

let purifier: ReturnType<typeof DOMPurify> | null = null;

const LOCAL_REF = /^\s*#/;
const URL_REF = /url\s*\(\s*['"]?\s*([^'")\s]*)/gi;

function instance(): ReturnType<typeof DOMPurify> {
  if (purifier) return purifier;
  const p = DOMPurify(window);
  p.addHook("uponSanitizeAttribute", (_node, data) => {
    const name = data.attrName.toLowerCase();
    const value = data.attrValue ?? "";
    if (name.startsWith("on")) data.keepAttr = false;
    if ((name === "href" || name === "xlink:href" || name === "src") && !LOCAL_REF.test(value)) data.keepAttr = false;
    for (const m of value.matchAll(URL_REF)) if (!m[1]!.startsWith("#")) data.keepAttr = false;
  });
  purifier = p;
  return p;
}

/** Sanitised SVG markup, or null when nothing drawable is left (no <svg> root). */
export function sanitizeSvg(markup: string): string | null {
  const p = instance();
  const frag = p.sanitize(markup, {
    USE_PROFILES: { svg: true, svgFilters: true },
    FORBID_TAGS: ["script", "foreignObject", "foreignobject", "style", "iframe", "image", "a", "animate", "set", "animateMotion", "animateTransform"],
    FORBID_ATTR: ["style"],
    RETURN_DOM_FRAGMENT: true,
  }) as DocumentFragment;
  const root = frag.firstElementChild;
  if (!root || root.tagName.toLowerCase() !== "svg") return null;
  root.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  return new XMLSerializer().serializeToString(root);
}

export function svgDataUrl(markup: string): string | null {
  const clean = sanitizeSvg(markup);
  return clean ? `data:image/svg+xml;charset=utf-8,${encodeURIComponent(clean)}` : null;
}

/** A stable hue from the avatar seed (or the id) for agents without a colour. */
function hue(seed: string): number {
  let h = 0;
  for (const c of seed) h = (h * 31 + c.charCodeAt(0)) % 360;
  return h;
}

const BUILTIN: Record<string, string> = {
  rocket: "🚀", robot: "🤖", bug: "🐞", book: "📘", gear: "⚙️", star: "⭐", bolt: "⚡", chat: "💬",
  code: "⌨️", shield: "🛡️", chart: "📈", mail: "✉️", bell: "🔔", heart: "❤️", globe: "🌐",
};

export function AgentIcon({ agent, size = 40 }: { agent: Json; size?: number }) {
  const icon = (agent.icon ?? null) as Json | null;
  const svg = useMemo(() => (icon?.kind === "svg" && typeof icon.markup === "string" ? svgDataUrl(icon.markup) : null), [icon?.markup, icon?.kind]);
  const color = typeof agent.color === "string" && /^#[0-9a-fA-F]{6}$/.test(agent.color) ? agent.color : `hsl(${hue(String(agent.avatar_seed ?? agent.id ?? ""))} 55% 45%)`;
  const style = { width: `${size}px`, height: `${size}px`, background: color, fontSize: `${Math.round(size * 0.5)}px` };
  if (svg) return <img class="agent-icon" src={svg} alt="" width={size} height={size} style={{ background: color }} />;
  let text = "";
  if (icon?.kind === "slug" && typeof icon.value === "string") text = [...icon.value].slice(0, 2).join("");
  else if (icon?.kind === "builtin" && typeof icon.id === "string") text = BUILTIN[icon.id] ?? icon.id.slice(0, 1).toUpperCase();
  else text = [...String(agent.name || agent.id || "?")][0]!.toUpperCase();
  return (
    <span class="agent-icon" aria-hidden="true" style={style}>
      {text}
    </span>
  );
}
