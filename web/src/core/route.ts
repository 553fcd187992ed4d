// Routes are paths under /remote; the daemon and the relay answer every extension-less path
// with the page, so a reload keeps the view.
import { useEffect, useState } from "preact/hooks";
import { isRequirementId, requirementFromSearch } from "../work/model";

export type Route =
  | { view: "sessions" }
  | { view: "session"; id: string }
  | { view: "inbox" }
  | { view: "agents" }
  | { view: "work" }
  | { view: "requirement"; id: string }
  | { view: "agent"; id: string }
  | { view: "settings" }
  | { view: "files"; path: string }
  | { view: "changes"; path: string }
  | { view: "terminal"; cwd: string };

export function parseRoute(path: string, search = ""): Route {
  const parts = path.replace(/^\/remote\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  // A notification about a requirement opens `/remote?requirement=R-1`.
  const named = parts.length === 0 ? requirementFromSearch(search) : null;
  if (named) return { view: "requirement", id: named };
  switch (parts[0]) {
    case "s":
      return parts[1] ? { view: "session", id: parts[1] } : { view: "sessions" };
    case "inbox":
      return { view: "inbox" };
    case "agents":
      return parts[1] ? { view: "agent", id: parts[1] } : { view: "agents" };
    case "settings":
      return { view: "settings" };
    case "work":
      return isRequirementId(parts[1]) ? { view: "requirement", id: parts[1] } : { view: "work" };
    case "files":
    case "changes":
      return parts[1] ? { view: parts[0], path: parts[1] } : { view: "sessions" };
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
    case "requirement":
      return `/remote/work/${encodeURIComponent(r.id)}`;
    case "files":
    case "changes":
      return `/remote/${r.view}/${encodeURIComponent(r.path)}`;
    case "terminal":
      return `/remote/term/${encodeURIComponent(r.cwd)}`;
    default:
      return `/remote/${r.view}`;
  }
}

const listeners = new Set<() => void>();
// Guarded so the unit tests can load the parser outside a browser.
if (typeof addEventListener === "function") addEventListener("popstate", () => listeners.forEach((l) => l()));

export function navigate(r: Route): void {
  const path = routePath(r);
  if (location.pathname !== path || location.search) history.pushState(null, "", path);
  listeners.forEach((l) => l());
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname, location.search));
  useEffect(() => {
    const l = () => setRoute(parseRoute(location.pathname, location.search));
    listeners.add(l);
    return () => listeners.delete(l);
  }, []);
  return route;
}
