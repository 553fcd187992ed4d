// The work view: the user's requirements (what they mean to get done) and their dispatches
// (batches of requests the daemon splits across projects). What waits for the user comes
// first. Every text here may come from a model or an agent: shown as text, never as markup.
import { useState } from "preact/hooks";
import { request } from "../core/daemon";
import { navigate } from "../core/route";
import { useStore, type Json } from "../core/store";
import { AttachButtons, Tray, useAttachments } from "../uploads/tray";
import { DispatchSection } from "./dispatch";
import { projectChoices, requirementTitle, sortRequirements, waitsForUser } from "./model";
import { ErrorLine, ProjectSelect, StatusBadge, useOp } from "./ui";
import "./work.css";

const MAX_IMAGES = 4;

function NewRequirement({ onDone }: { onDone: () => void }) {
  const access = useStore((s) => s.access);
  const [text, setText] = useState("");
  const [project, setProject] = useState("");
  const shots = useAttachments();
  const [busy, err, run] = useOp();
  const images = shots.uploaded.filter((u) => u.image).map((u) => u.path);
  const notImages = shots.uploaded.filter((u) => !u.image).length;
  const tooMany = images.length > MAX_IMAGES;
  return (
    <form
      class="wform"
      aria-label="New requirement"
      onSubmit={(e) => {
        e.preventDefault();
        if (!text.trim() || shots.busy || tooMany) return;
        void run(async () => {
          const fields: Json = { text: text.trim(), source: access === "local" ? "desktop" : "phone", project: project || null };
          if (images.length) fields.images = images;
          const made = await request("requirement_create", fields);
          shots.clear();
          onDone();
          if (typeof made.requirement === "string") navigate({ view: "requirement", id: made.requirement });
        });
      }}
    >
      <label for="wr-text">What do you want done?</label>
      <textarea id="wr-text" rows={4} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      <ProjectSelect id="wr-project" value={project} onChange={setProject} />
      <div class="wshots">
        <span class="muted">Screenshots (up to {MAX_IMAGES})</span>
        <AttachButtons onFiles={(files) => shots.add(files)} />
      </div>
      <Tray a={shots} />
      {tooMany ? <p class="notice error">At most {MAX_IMAGES} images.</p> : null}
      {notImages ? <p class="muted">Files that are not images stay out of the requirement.</p> : null}
      <div class="row">
        <button type="submit" class="primary" disabled={busy || shots.busy || tooMany || !text.trim()}>
          Save
        </button>
        <button type="button" onClick={onDone}>
          Cancel
        </button>
      </div>
      <ErrorLine text={err} />
    </form>
  );
}

function projectName(workspaces: Json[], id: unknown): string {
  if (typeof id !== "string") return "";
  return projectChoices(workspaces).find((p) => p.id === id)?.label.split(" · ")[0] ?? id;
}

function RequirementRow({ r, workspaces }: { r: Json; workspaces: Json[] }) {
  const sessions = Array.isArray(r.sessions) ? r.sessions.length : 0;
  const project = projectName(workspaces, r.project);
  return (
    <li class={`wrow${waitsForUser(r) ? " yours" : ""}`}>
      <a
        href={`/remote/work/${encodeURIComponent(String(r.id))}`}
        onClick={(e) => {
          e.preventDefault();
          navigate({ view: "requirement", id: String(r.id) });
        }}
      >
        <span class="wrow-top">
          <span class="wtitle">{requirementTitle(r)}</span>
          <StatusBadge status={r.status} />
        </span>
        <span class="meta">
          {String(r.id)}
          {project ? <> · {project}</> : null}
          {sessions ? <> · {sessions === 1 ? "1 session" : `${sessions} sessions`}</> : null}
          {r.gate ? <> · behind the start gate</> : null}
        </span>
      </a>
    </li>
  );
}

export function WorkView() {
  const requirements = useStore((s) => s.requirements);
  const workspaces = useStore((s) => s.workspaces);
  const [adding, setAdding] = useState(false);
  const [showClosed, setShowClosed] = useState(false);
  const sorted = sortRequirements(requirements);
  const open = sorted.filter((r) => r.state !== "done" && r.state !== "parked");
  const closed = sorted.filter((r) => r.state === "done" || r.state === "parked");
  return (
    <div class="work">
      <div class="slist-head">
        <h1>Work</h1>
        {!adding && (
          <button class="primary" onClick={() => setAdding(true)}>
            New requirement
          </button>
        )}
      </div>
      {adding && <NewRequirement onDone={() => setAdding(false)} />}
      <section aria-labelledby="w-req">
        <h2 id="w-req">Requirements</h2>
        {open.length === 0 ? <p class="empty">No open requirements.</p> : null}
        <ul class="list wlist" aria-label="Open requirements">
          {open.map((r) => (
            <RequirementRow key={String(r.id)} r={r} workspaces={workspaces} />
          ))}
        </ul>
        {closed.length > 0 && (
          <>
            <button class="link" aria-expanded={showClosed} onClick={() => setShowClosed(!showClosed)}>
              {showClosed ? "Hide" : "Show"} done and parked ({closed.length})
            </button>
            {showClosed && (
              <ul class="list wlist" aria-label="Done and parked requirements">
                {closed.map((r) => (
                  <RequirementRow key={String(r.id)} r={r} workspaces={workspaces} />
                ))}
              </ul>
            )}
          </>
        )}
      </section>
      <DispatchSection />
    </div>
  );
}
