// Files and changes of a project or a session's directory: a folder browser with a text
// viewer, and the git status with per-file unified diffs. File names, contents and diffs are
// hostile: they are only ever rendered as text.
import { useEffect, useState } from "preact/hooks";
import "./files.css";
import { request } from "../core/daemon";
import { navigate } from "../core/route";
import type { Json } from "../core/store";
import { Diff } from "./diff";
import { crumbs, formatSize, join, parent, statusClass, statusLabel, statusLetter, type Entry, type GitFile } from "./model";

type Tab = "files" | "changes";

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function baseName(path: string): string {
  const p = path.replace(/\/+$/, "");
  return p.slice(p.lastIndexOf("/") + 1) || "/";
}

export function FilesView({ root, tab }: { root: string; tab: Tab }) {
  const title = baseName(root);
  return (
    <section class="fv" aria-labelledby="fv-title">
      <header class="fv-head">
        <a
          class="back"
          href="/remote"
          aria-label="Back"
          onClick={(e) => {
            e.preventDefault();
            if (history.length > 1) history.back();
            else navigate({ view: "sessions" });
          }}
        >
          ‹
        </a>
        <div class="fv-title">
          <h1 id="fv-title">{title}</h1>
          <span class="muted path">{root}</span>
        </div>
      </header>
      <nav class="fv-tabs" aria-label="Files or changes">
        {(["files", "changes"] as Tab[]).map((t) => (
          <a
            key={t}
            href="#"
            aria-current={t === tab ? "page" : undefined}
            onClick={(e) => {
              e.preventDefault();
              navigate({ view: t, path: root });
            }}
          >
            {t === "files" ? "Files" : "Changes"}
          </a>
        ))}
      </nav>
      {tab === "files" ? <Browser key={root} root={root} /> : <Changes key={root} root={root} />}
    </section>
  );
}

interface Listing {
  path: string;
  git: boolean;
  entries: Entry[];
  truncated: boolean;
}

function Browser({ root }: { root: string }) {
  const [dir, setDir] = useState(root);
  const [listing, setListing] = useState<Listing | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  // The daemon answers with the resolved path: crumbs are made against the resolved root.
  const [realRoot, setRealRoot] = useState(root);

  useEffect(() => {
    let live = true;
    setErr(null);
    request("fs_list", { path: dir })
      .then((r) => {
        if (!live) return;
        const l = r as unknown as Listing;
        setListing(l);
        if (dir === root) setRealRoot(l.path);
      })
      .catch((e) => live && setErr(message(e)));
    return () => {
      live = false;
    };
  }, [dir, root]);

  const here = listing?.path ?? dir;
  const up = parent(realRoot, here);
  return (
    <div class={`fv-body${open ? " has-file" : ""}`}>
      <div class="fv-list">
        <nav aria-label="Folder path" class="crumbs">
          {crumbs(realRoot, here).map((c, i, all) =>
            i === all.length - 1 ? (
              <span key={c.path} aria-current="location">
                {c.label}
              </span>
            ) : (
              <button key={c.path} type="button" class="link" onClick={() => setDir(c.path)}>
                {c.label}
              </button>
            ),
          )}
        </nav>
        {err && (
          <p class="notice error" role="alert">
            {err}
          </p>
        )}
        {!listing && !err && (
          <p class="muted" role="status">
            Loading…
          </p>
        )}
        {listing && (
          <ul class="entries" aria-label={`Entries of ${baseName(here)}`}>
            {up && (
              <li>
                <button type="button" class="entry dir" onClick={() => setDir(up)}>
                  <span class="icon" aria-hidden="true">
                    ↰
                  </span>
                  <span class="name">..</span>
                  <span class="size sr-only">parent folder</span>
                </button>
              </li>
            )}
            {listing.entries.map((e) => {
              const path = join(here, e.name);
              return (
                <li key={e.name}>
                  <button
                    type="button"
                    class={`entry${e.dir ? " dir" : ""}`}
                    aria-current={open === path ? "true" : undefined}
                    onClick={() => (e.dir ? (setOpen(null), setDir(path)) : setOpen(path))}
                  >
                    <span class="icon" aria-hidden="true">
                      {e.dir ? "▸" : "·"}
                    </span>
                    <span class="name">{e.name}</span>
                    <span class="size">{e.dir ? "folder" : formatSize(e.size)}</span>
                  </button>
                </li>
              );
            })}
            {listing.entries.length === 0 && <li class="empty">This folder is empty.</li>}
          </ul>
        )}
        {listing?.truncated && <p class="notice info">Only the first {listing.entries.length} entries are shown.</p>}
      </div>
      {open && <Viewer path={open} close={() => setOpen(null)} />}
    </div>
  );
}

interface Read {
  size: number;
  binary: boolean;
  text: string;
  truncated: boolean;
}

function Viewer({ path, close }: { path: string; close(): void }) {
  const [file, setFile] = useState<Read | null>(null);
  const [err, setErr] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    setFile(null);
    setErr(null);
    request("fs_read", { path })
      .then((r) => live && setFile(r as unknown as Read))
      .catch((e) => live && setErr(message(e)));
    return () => {
      live = false;
    };
  }, [path]);
  return (
    <article class="fv-file" aria-labelledby="fv-file-name">
      <header>
        <button type="button" class="small" onClick={close} aria-label="Close the file">
          ✕
        </button>
        <h2 id="fv-file-name">{baseName(path)}</h2>
        {file && <span class="muted">{formatSize(file.size)}</span>}
      </header>
      {err && (
        <p class="notice error" role="alert">
          {err}
        </p>
      )}
      {!file && !err && (
        <p class="muted" role="status">
          Loading…
        </p>
      )}
      {file?.binary && <p class="notice info">Binary file: not shown.</p>}
      {file?.truncated && !file.binary && (
        <p class="notice info">Showing the first 1 MB of {formatSize(file.size)}.</p>
      )}
      {file && !file.binary && (
        <pre class="code" tabIndex={0} aria-label={`Contents of ${baseName(path)}`}>
          {file.text}
        </pre>
      )}
    </article>
  );
}

interface Status {
  repo: boolean;
  root?: string;
  branch?: string;
  files: GitFile[];
  truncated: boolean;
}

function Changes({ root }: { root: string }) {
  const [status, setStatus] = useState<Status | null>(null);
  const [err, setErr] = useState<string | null>(null);
  // `null`: every change; a path: that file's.
  const [pick, setPick] = useState<string | null | undefined>(undefined);
  const [diff, setDiff] = useState<Json | null>(null);
  const [diffErr, setDiffErr] = useState<string | null>(null);
  const [tick, setTick] = useState(0);

  useEffect(() => {
    let live = true;
    setErr(null);
    request("git_status", { path: root })
      .then((r) => live && setStatus(r as unknown as Status))
      .catch((e) => live && setErr(message(e)));
    return () => {
      live = false;
    };
  }, [root, tick]);

  useEffect(() => {
    if (pick === undefined) return;
    let live = true;
    setDiff(null);
    setDiffErr(null);
    request("git_diff", pick === null ? { path: root } : { path: root, file: pick })
      .then((r) => live && setDiff(r))
      .catch((e) => live && setDiffErr(message(e)));
    return () => {
      live = false;
    };
  }, [root, pick, tick]);

  return (
    <div class={`fv-body${pick !== undefined ? " has-file" : ""}`}>
      <div class="fv-list">
        <div class="fv-bar">
          {status?.repo && (
            <span class="branch" title="Branch">
              {status.branch ?? "detached HEAD"}
            </span>
          )}
          <button type="button" class="small" onClick={() => setTick((t) => t + 1)}>
            Refresh
          </button>
          {status?.repo && status.files.length > 0 && (
            <button type="button" class="small" aria-pressed={pick === null} onClick={() => setPick(null)}>
              All changes
            </button>
          )}
        </div>
        {err && (
          <p class="notice error" role="alert">
            {err}
          </p>
        )}
        {!status && !err && (
          <p class="muted" role="status">
            Loading…
          </p>
        )}
        {status && !status.repo && <p class="empty">This folder is not in a git repository.</p>}
        {status?.repo && status.files.length === 0 && <p class="empty">No changes.</p>}
        {status?.repo && status.files.length > 0 && (
          <ul class="entries changes" aria-label="Changed files">
            {status.files.map((f) => (
              <li key={f.path}>
                <button
                  type="button"
                  class="entry"
                  aria-current={pick === f.path ? "true" : undefined}
                  onClick={() => setPick(f.path)}
                >
                  <span class={`code ${statusClass(f.status)}`} title={statusLabel(f.status)}>
                    <span aria-hidden="true">{statusLetter(f.status)}</span>
                    <span class="sr-only">{statusLabel(f.status)}</span>
                  </span>
                  <span class="name">
                    {f.from && <span class="from">{f.from} → </span>}
                    {f.path}
                  </span>
                  <span class="size raw">{f.status.replace(/ /g, "·")}</span>
                </button>
              </li>
            ))}
          </ul>
        )}
        {status?.truncated && <p class="notice info">Only the first {status.files.length} changed files are listed.</p>}
      </div>
      {pick !== undefined && (
        <article class="fv-file" aria-labelledby="fv-diff-name">
          <header>
            <button type="button" class="small" onClick={() => setPick(undefined)} aria-label="Close the diff">
              ✕
            </button>
            <h2 id="fv-diff-name">{pick === null ? "All changes" : baseName(pick)}</h2>
          </header>
          {diffErr && (
            <p class="notice error" role="alert">
              {diffErr}
            </p>
          )}
          {!diff && !diffErr && (
            <p class="muted" role="status">
              Loading…
            </p>
          )}
          {diff && <Diff text={String(diff.diff ?? "")} truncated={diff.truncated === true} />}
        </article>
      )}
    </div>
  );
}
