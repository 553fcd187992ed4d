// The page's frame: the connection banner, the navigation and the view the route names.
import { navigate, useRoute, type Route } from "../core/route";
import { useStore } from "../core/store";
import { StatusBanner } from "./status";
import { ThemeToggle } from "./theme";
import { SessionsView } from "../sessions/view";
import { SessionView } from "../session/view";
import { InboxView } from "../inbox/view";
import { useReports } from "../inbox/reports";
import { waitingCount } from "../inbox/model";
import { AgentsView, AgentView } from "../agents/view";
import { SettingsView } from "../settings/view";
import { Refused } from "./welcome";
import { FilesView } from "../files/view";
import { TerminalView } from "../term/view";
import { WorkView } from "../work/view";
import { RequirementView } from "../work/requirement";
import { workWaiting } from "../work/model";

interface Tab {
  view: Route["view"];
  label: string;
  localOnly?: boolean;
}

const TABS: Tab[] = [
  { view: "sessions", label: "Sessions" },
  { view: "inbox", label: "Inbox" },
  { view: "work", label: "Work" },
  { view: "agents", label: "Agents" },
  { view: "settings", label: "Settings" },
];

function isActive(tab: Tab, route: Route): boolean {
  if (tab.view === route.view) return true;
  return (
    (tab.view === "sessions" && route.view === "session") ||
    (tab.view === "agents" && route.view === "agent") ||
    (tab.view === "work" && route.view === "requirement")
  );
}

function InboxCount() {
  // Open questions + pending actions + unread reports: what waits for the user.
  const questions = useStore((s) => s.questions);
  const actions = useStore((s) => s.actions);
  const { reports } = useReports();
  const n = waitingCount(questions, actions, reports);
  return n > 0 ? <span class="count" aria-label={`${n} waiting`}>{n}</span> : null;
}

function WorkCount() {
  // Requirements waiting for the user (confirm, review, an approval, a proposal) and plans.
  const requirements = useStore((s) => s.requirements);
  const dispatches = useStore((s) => s.dispatches);
  const n = workWaiting(requirements, dispatches);
  return n > 0 ? <span class="count" aria-label={`${n} waiting`}>{n}</span> : null;
}

export function App() {
  const route = useRoute();
  const access = useStore((s) => s.access);
  // A paired page the computer no longer takes has nothing left to show but that.
  const refused = useStore((s) =>
    s.access !== "local" && s.conn.kind === "stopped" && (s.conn.why === "revoked" || s.conn.why === "refused") ? s.conn.why : null,
  );
  if (refused) return <Refused why={refused} />;
  return (
    <div class="app">
      <header class="top">
        <a
          class="brand"
          href="/remote"
          onClick={(e) => {
            e.preventDefault();
            navigate({ view: "sessions" });
          }}
        >
          jucode
        </a>
        <nav aria-label="Main">
          {TABS.filter((t) => !t.localOnly || access === "local").map((t) => (
            <a
              href={t.view === "sessions" ? "/remote" : `/remote/${t.view}`}
              aria-current={isActive(t, route) ? "page" : undefined}
              onClick={(e) => {
                e.preventDefault();
                navigate({ view: t.view } as Route);
              }}
            >
              {t.label}
              {t.view === "inbox" && <InboxCount />}
              {t.view === "work" && <WorkCount />}
            </a>
          ))}
        </nav>
        <ThemeToggle />
      </header>
      <StatusBanner />
      <main id="main">
        {route.view === "sessions" && <SessionsView />}
        {route.view === "session" && <SessionView id={route.id} />}
        {route.view === "inbox" && <InboxView />}
        {route.view === "agents" && <AgentsView />}
        {route.view === "agent" && <AgentView id={route.id} />}
        {route.view === "settings" && <SettingsView />}
        {route.view === "work" && <WorkView />}
        {route.view === "requirement" && <RequirementView id={route.id} />}
        {(route.view === "files" || route.view === "changes") && <FilesView root={route.path} tab={route.view} />}
        {route.view === "terminal" && <TerminalView key={route.cwd} cwd={route.cwd} />}
      </main>
    </div>
  );
}
