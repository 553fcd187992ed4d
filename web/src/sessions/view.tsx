// The session list: every hosted session, newest first, with its state.
import { navigate } from "../core/route";
import { useStore, type Json } from "../core/store";

function title(s: Json): string {
  return (s.title as string) || (s.cwd as string)?.split("/").pop() || s.session;
}

export function SessionsView() {
  const sessions = useStore((s) => s.sessions);
  const shown = sessions.filter((s) => !s.archived).sort((a, b) => (b.updated_at ?? 0) - (a.updated_at ?? 0));
  return (
    <section aria-labelledby="sessions-h">
      <h1 id="sessions-h">Sessions</h1>
      {shown.length === 0 && <p class="empty">No sessions yet.</p>}
      <ul class="list" data-testid="sessions">
        {shown.map((s) => (
          <li key={s.session}>
            <a
              href={`/remote/s/${encodeURIComponent(s.session)}`}
              onClick={(e) => {
                e.preventDefault();
                navigate({ view: "session", id: s.session });
              }}
            >
              <span class="title">{title(s)}</span>
              <span class="meta">
                {s.engine ?? "jucode"} · {s.busy ? "running" : s.open ? "open" : "closed"}
              </span>
            </a>
          </li>
        ))}
      </ul>
    </section>
  );
}
