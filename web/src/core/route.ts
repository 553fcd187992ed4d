// Routes are paths under /remote; the daemon and the relay answer every extension-less path
// with the page, so a reload keeps the view.
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { view: "sessions" }
  | { view: "session"; id: string }
  | { view: "inbox" }
  | { view: "agents" }
  | { view: "agent"; id: string }
  | { view: "settings" }
  | { view: "terminal"; cwd: string };

export function parseRoute(path: string): Route {
  const parts = path.replace(/^\/remote\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  switch (parts[0]) {
    case "s":
      return parts[1] ? { view: "session", id: parts[1] } : { view: "sessions" };
    case "inbox":
      return { view: "inbox" };
    case "agents":
      return parts[1] ? { view: "agent", id: parts[1] } : { view: "agents" };
    case "settings":
      return { view: "settings" };
    case "term":
      return parts[1] ? { view: "terminal", cwd: parts.slice(1).join("/") } : { view: "sessions" };
    default:
      return { view: "sessions" };
  }
}

export function routePath(r: Route): string {
  switch (r.view) {
    case "sessions":
      return "/remote";
    case "session":
      return `/remote/s/${encodeURIComponent(r.id)}`;
    case "agent":
      return `/remote/agents/${encodeURIComponent(r.id)}`;
    case "terminal":
      return `/remote/term/${encodeURIComponent(r.cwd)}`;
    default:
      return `/remote/${r.view}`;
  }
}

const listeners = new Set<() => void>();
addEventListener("popstate", () => listeners.forEach((l) => l()));

export function navigate(r: Route): void {
  const path = routePath(r);
  if (location.pathname !== path) history.pushState(null, "", path);
  listeners.forEach((l) => l());
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const l = () => setRoute(parseRoute(location.pathname));
    listeners.add(l);
    return () => listeners.delete(l);
  }, []);
  return route;
}
