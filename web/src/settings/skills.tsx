// Settings → Skills: both sources' catalog (source, description, license, installed) with its
// warnings, and installs, on the desktop. The daemon refuses both ops to a paired device, so a
// device page sends neither and says why. Every string of the catalog is hostile: text only.
import { useEffect, useState } from "preact/hooks";
import { request } from "../core/daemon";
import { useStore, type Json } from "../core/store";
import "./skills.css";

type CatalogData = { skills: Json[]; warnings: string[]; installDir: string };

function message(e: unknown): string {
  return (e as Error)?.message ?? String(e);
}

export function Skills({ local }: { local: boolean }) {
  if (!local) {
    return (
      <section class="card skills" aria-labelledby="skills-h" data-testid="skills">
        <h2 id="skills-h">Skills</h2>
        <p class="meta">
          Skills are listed and installed from the desktop only: an installed skill is instructions and scripts that later
          sessions run.
        </p>
      </section>
    );
  }
  return <Catalog />;
}

function Catalog() {
  const open = useStore((s) => s.conn.kind === "open");
  const [backend, setBackend] = useState("jucode");
  const [catalog, setCatalog] = useState<CatalogData | null>(null);
  const [problem, setProblem] = useState("");
  const [busy, setBusy] = useState<string | null>(null);
  const [notice, setNotice] = useState("");
  const load = async () => {
    setProblem("");
    try {
      const r = await request("skills_catalog", { backend });
      setCatalog({
        skills: Array.isArray(r.skills) ? r.skills : [],
        warnings: Array.isArray(r.warnings) ? r.warnings.map(String) : [],
        installDir: String(r.installDir ?? ""),
      });
    } catch (e) {
      setCatalog(null);
      setProblem(message(e));
    }
  };
  useEffect(() => {
    if (open) void load();
  }, [open, backend]);
  const install = async (s: Json) => {
    const key = `${s.source}/${s.id}`;
    setBusy(key);
    setNotice("");
    setProblem("");
    try {
      const r = await request("skill_install", { source: s.source, skill: s.id, backend });
      setNotice(`Installed ${String(s.name ?? s.id)} in ${String(r.path ?? "")}.`);
      await load();
    } catch (e) {
      setProblem(message(e));
    }
    setBusy(null);
  };
  return (
    <section class="card skills" aria-labelledby="skills-h" data-testid="skills">
      <h2 id="skills-h">Skills</h2>
      <label class="row">
          <span>Install for</span>
          <select value={backend} onChange={(e) => setBackend((e.target as HTMLSelectElement).value)}>
            <option value="jucode">jucode sessions</option>
            <option value="claude">Claude Code</option>
          </select>
      </label>
      {catalog && <p class="meta path">{catalog.installDir}</p>}
      {catalog?.warnings.map((w) => (
        <p class="note warn" key={w}>
          {w}
        </p>
      ))}
      {catalog === null && !problem && <p class="meta">Loading…</p>}
      {catalog?.skills.length === 0 && <p class="empty">No skills listed.</p>}
      {catalog && catalog.skills.length > 0 && (
        <ul class="items">
          {catalog.skills.map((s) => {
            const key = `${s.source}/${s.id}`;
            const name = String(s.name ?? s.id);
            return (
              <li key={key}>
                <div class="what">
                  <span class="name">
                    {name}
                    {s.installed && <span class="badge">installed</span>}
                    {s.isDefault && <span class="badge">recommended</span>}
                  </span>
                  <span class="meta">
                    {s.source === "anthropic" ? "Anthropic" : "JuCode marketplace"}
                    {s.license ? ` · ${String(s.license)}` : ""}
                  </span>
                  {s.description && <span class="desc">{String(s.description)}</span>}
                </div>
                {s.redistributable === false ? (
                  <span class="meta">source-available: not installable</span>
                ) : (
                  <button
                    type="button"
                    class="small"
                    disabled={busy !== null}
                    aria-label={`${s.installed ? "Reinstall" : "Install"} ${name}`}
                    onClick={() => void install(s)}
                  >
                    {busy === key ? "Installing…" : s.installed ? "Reinstall" : "Install"}
                  </button>
                )}
              </li>
            );
          })}
        </ul>
      )}
      <div aria-live="polite" class="live">
        {problem && (
          <p class="note error" role="alert">
            {problem}
          </p>
        )}
        {notice && <p class="note ok">{notice}</p>}
      </div>
    </section>
  );
}
