// This computer: workspaces and projects for everyone; on the desktop (local access) pairing
// codes and relay links as QR codes, the paired devices and the relay; on a paired page
// Web Push. Local-only sections are not even mounted on a device page, so it never sends
// their ops.
import { useEffect, useRef, useState } from "preact/hooks";
import { request } from "../core/daemon";
import { FilesLink } from "../files/link";
import { forgetAll } from "../core/auth";
import { store, useStore, type Json } from "../core/store";
import { qrDataUrl } from "./qr";
import { countdown } from "./time";
import {
  KEY_PUSH_ON,
  currentSubscription,
  describeResult,
  disablePush,
  enablePush,
  fetchPushKey,
  pushUnsupported,
  testPush,
  type PushResult,
} from "./push";
import { Skills } from "./skills";
import "./settings.css";

function message(e: unknown): string {
  return (e as Error)?.message ?? String(e);
}

function when(ms: unknown): string {
  const n = Number(ms);
  return Number.isFinite(n) && n > 0 ? new Date(n).toLocaleString() : "unknown";
}

/** Re-renders every second while `on`. */
function useTicker(on: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!on) return;
    setNow(Date.now());
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [on]);
  return now;
}

/** Runs `load` now and after every reconnect. */
function useOnOpen(load: () => void): void {
  const open = useStore((s) => s.conn.kind === "open");
  useEffect(() => {
    if (open) load();
  }, [open]);
}

export function SettingsView() {
  const access = useStore((s) => s.access);
  return (
    <section class="settings" aria-labelledby="settings-h">
      <h1 id="settings-h">Settings</h1>
      {access === "local" && <LocalSections />}
      <Workspaces />
      <Skills local={access === "local"} />
      {(access === "device" || access === "relay") && <Notifications />}
      <ThisPage />
    </section>
  );
}

// ---- Workspaces and projects ------------------------------------------------------------

function Workspaces() {
  const workspaces = useStore((s) => s.workspaces);
  const [problem, setProblem] = useState("");
  const [notice, setNotice] = useState("");
  const change = async (op: string, fields: Record<string, unknown>, done: string): Promise<boolean> => {
    setProblem("");
    setNotice("");
    try {
      const reply = await request(op, fields);
      store.apply(reply);
      setNotice(done);
      return true;
    } catch (e) {
      setProblem(message(e));
      return false;
    }
  };
  return (
    <section class="card" aria-labelledby="ws-h" data-testid="workspaces">
      <h2 id="ws-h">Workspaces and projects</h2>
      {workspaces.length === 0 && <p class="empty">No projects yet. Add a folder below.</p>}
      {workspaces.map((w) => (
        <Workspace key={w.id} ws={w} change={change} />
      ))}
      <div aria-live="polite" class="live">
        {problem && (
          <p class="note error" role="alert">
            {problem}
          </p>
        )}
        {notice && <p class="note ok">{notice}</p>}
      </div>
      <AddProject workspaces={workspaces} change={change} />
      <CreateProject workspaces={workspaces} change={change} />
    </section>
  );
}

type Change = (op: string, fields: Record<string, unknown>, done: string) => Promise<boolean>;

function Workspace({ ws, change }: { ws: Json; change: Change }) {
  const [renaming, setRenaming] = useState(false);
  const [name, setName] = useState(String(ws.name ?? ""));
  const [confirm, setConfirm] = useState<string | null>(null);
  const projects: Json[] = Array.isArray(ws.projects) ? ws.projects : [];
  const rename = async (e: Event) => {
    e.preventDefault();
    const n = name.trim();
    if (!n) return;
    const { workspaces, workspacesRev } = store.state;
    const next = workspaces.map((w) => (w.id === ws.id ? { ...w, name: n } : w));
    if (await change("workspaces_set", { rev: workspacesRev, workspaces: next }, `Renamed to ${n}.`)) setRenaming(false);
  };
  return (
    <div class="workspace">
      <div class="row">
        {renaming ? (
          <form class="inline" onSubmit={rename}>
            <label class="sr-only" for={`ws-name-${ws.id}`}>
              Workspace name
            </label>
            <input id={`ws-name-${ws.id}`} value={name} maxLength={200} onInput={(e) => setName(e.currentTarget.value)} />
            <button type="submit">Save</button>
            <button type="button" onClick={() => setRenaming(false)}>
              Cancel
            </button>
          </form>
        ) : (
          <>
            <h3>
              {String(ws.name ?? ws.id)}
              {ws.is_default && <span class="tag"> default</span>}
            </h3>
            <button
              type="button"
              class="small"
              aria-label={`Rename workspace ${String(ws.name ?? ws.id)}`}
              onClick={() => {
                setName(String(ws.name ?? ""));
                setRenaming(true);
              }}
            >
              Rename
            </button>
          </>
        )}
      </div>
      {projects.length === 0 ? (
        <p class="empty">No projects in this workspace.</p>
      ) : (
        <ul class="items">
          {projects.map((p) => (
            <li key={p.id}>
              <div class="what">
                <span class="name">{String(p.name ?? p.id)}</span>
                <span class="meta path">{String(p.path ?? "")}</span>
              </div>
              {typeof p.path === "string" && <FilesLink path={p.path} label={`Files of ${String(p.name ?? p.id)}`} />}
              {confirm === p.id ? (
                <span class="confirm" role="group" aria-label={`Remove ${String(p.name)}?`}>
                  <span>Remove from the list? Its files stay.</span>
                  <button
                    type="button"
                    class="danger"
                    onClick={async () => {
                      await change("project_remove", { workspace: ws.id, project: p.id }, `Removed ${String(p.name)}.`);
                      setConfirm(null);
                    }}
                  >
                    Remove
                  </button>
                  <button type="button" onClick={() => setConfirm(null)}>
                    Cancel
                  </button>
                </span>
              ) : (
                <button type="button" class="small" aria-label={`Remove project ${String(p.name)}`} onClick={() => setConfirm(p.id)}>
                  Remove
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function WorkspacePick({ id, workspaces, value, set }: { id: string; workspaces: Json[]; value: string; set(v: string): void }) {
  if (workspaces.length < 2) return null;
  return (
    <label for={id}>
      Workspace
      <select id={id} value={value} onChange={(e) => set(e.currentTarget.value)}>
        {workspaces.map((w) => (
          <option key={w.id} value={w.id}>
            {String(w.name ?? w.id)}
          </option>
        ))}
      </select>
    </label>
  );
}

function defaultWorkspace(workspaces: Json[]): string {
  return String((workspaces.find((w) => w.is_default) ?? workspaces[0])?.id ?? "");
}

function AddProject({ workspaces, change }: { workspaces: Json[]; change: Change }) {
  const [path, setPath] = useState("");
  const [name, setName] = useState("");
  const [ws, setWs] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!path.trim()) return;
    const fields: Record<string, unknown> = { path: path.trim() };
    const w = ws || defaultWorkspace(workspaces);
    if (w) fields.workspace = w;
    if (name.trim()) fields.project_name = name.trim();
    if (await change("project_add", fields, `Added ${name.trim() || path.trim().replace(/\/+$/, "").split("/").pop()}.`)) {
      setPath("");
      setName("");
    }
  };
  return (
    <details class="more">
      <summary>
        <h3 id="add-h">Add an existing folder</h3>
      </summary>
      <form class="stack" onSubmit={submit} aria-labelledby="add-h">
      <label for="add-path">
        Folder
        <input id="add-path" placeholder="/home/you/code/app or ~/code/app" value={path} onInput={(e) => setPath(e.currentTarget.value)} />
      </label>
      <label for="add-name">
        Name (optional)
        <input id="add-name" maxLength={200} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <WorkspacePick id="add-ws" workspaces={workspaces} value={ws || defaultWorkspace(workspaces)} set={setWs} />
      <div>
        <button type="submit" disabled={!path.trim()}>
          Add project
        </button>
      </div>
      </form>
    </details>
  );
}

function CreateProject({ workspaces, change }: { workspaces: Json[]; change: Change }) {
  const [parent, setParent] = useState("~/");
  const [name, setName] = useState("");
  const [git, setGit] = useState(true);
  const [ws, setWs] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!parent.trim() || !name.trim()) return;
    const fields: Record<string, unknown> = { parent: parent.trim(), name: name.trim(), git_init: git };
    const w = ws || defaultWorkspace(workspaces);
    if (w) fields.workspace = w;
    if (await change("project_create", fields, `Created ${name.trim()}.`)) setName("");
  };
  return (
    <details class="more">
      <summary>
        <h3 id="create-h">Create a new project</h3>
      </summary>
      <form class="stack" onSubmit={submit} aria-labelledby="create-h">
      <label for="create-parent">
        In the folder
        <input id="create-parent" value={parent} onInput={(e) => setParent(e.currentTarget.value)} />
      </label>
      <label for="create-name">
        New folder name
        <input id="create-name" maxLength={200} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </label>
      <label class="check" for="create-git">
        <input id="create-git" type="checkbox" checked={git} onChange={(e) => setGit(e.currentTarget.checked)} />
        Run <code>git init</code> in it
      </label>
      <WorkspacePick id="create-ws" workspaces={workspaces} value={ws || defaultWorkspace(workspaces)} set={setWs} />
      <div>
        <button type="submit" disabled={!parent.trim() || !name.trim()}>
          Create project
        </button>
      </div>
      </form>
    </details>
  );
}

// ---- Local only: pairing, devices, relay -------------------------------------------------

interface Relay {
  enabled: boolean;
  connected: boolean;
  host: string | null;
  url: string | null;
}

function LocalSections() {
  const [devices, setDevices] = useState<Json[] | null>(null);
  const [devProblem, setDevProblem] = useState("");
  const [relay, setRelay] = useState<Relay | null>(null);
  const loadDevices = async (): Promise<Json[] | null> => {
    try {
      const r = await request("device_list");
      const list = Array.isArray(r.devices) ? (r.devices as Json[]) : [];
      setDevices(list);
      setDevProblem("");
      return list;
    } catch (e) {
      setDevProblem(message(e));
      return null;
    }
  };
  const loadRelay = async () => {
    try {
      setRelay((await request("relay_status")) as unknown as Relay);
    } catch {
      /* shown as unknown */
    }
  };
  useOnOpen(() => {
    void loadDevices();
    void loadRelay();
  });
  return (
    <>
      <Pairing devices={devices} reload={loadDevices} relay={relay} />
      <Devices devices={devices} problem={devProblem} reload={loadDevices} />
      <RelaySection relay={relay} setRelay={setRelay} reload={loadRelay} />
    </>
  );
}

interface Offer {
  kind: "code" | "link";
  code: string;
  url: string;
  expires: number;
}

function Pairing({ devices, reload, relay }: { devices: Json[] | null; reload(): Promise<Json[] | null>; relay: Relay | null }) {
  const [offer, setOffer] = useState<Offer | null>(null);
  const [problem, setProblem] = useState("");
  const [paired, setPaired] = useState("");
  const known = useRef<Set<string>>(new Set());
  const now = useTicker(offer !== null);
  const left = offer ? countdown(offer.expires, now) : null;
  // While a code can still be used, look for the device it pairs (the daemon does not
  // broadcast the device list).
  useEffect(() => {
    if (!offer || !left) return;
    const t = setInterval(async () => {
      const list = await reload();
      const fresh = list?.find((d) => !known.current.has(String(d.id)));
      if (fresh) {
        setPaired(`Paired: ${String(fresh.name ?? fresh.id)}.`);
        setOffer(null);
      }
    }, 2000);
    return () => clearInterval(t);
  }, [offer, left !== null]);
  const start = async (kind: Offer["kind"]) => {
    setProblem("");
    setPaired("");
    known.current = new Set((devices ?? []).map((d) => String(d.id)));
    try {
      if (kind === "code") {
        const r = await request("pair_start");
        const code = String(r.code);
        setOffer({ kind, code, url: `${location.origin}/remote?pair=${encodeURIComponent(code)}`, expires: Number(r.expires_at) });
      } else {
        const r = await request("pair_link");
        setOffer({ kind, code: String(r.code), url: String(r.link), expires: Number(r.expires_at) });
      }
    } catch (e) {
      setProblem(message(e));
    }
  };
  const loopback = /^(127\.|localhost$|\[::1\]$)/.test(location.hostname);
  const relayReady = !!relay?.enabled && !!relay?.connected;
  return (
    <section class="card" aria-labelledby="pair-h" data-testid="pairing">
      <h2 id="pair-h">Pair a phone</h2>
      <p class="meta">A code lasts 5 minutes and pairs one device. The phone opens the address in the QR code, or types the code on this page's welcome screen.</p>
      <div class="buttons">
        <button type="button" class="primary" onClick={() => void start("code")}>
          {offer?.kind === "code" ? "New code" : "Pair a phone"}
        </button>
        <button
          type="button"
          disabled={!relayReady}
          aria-describedby={relayReady ? undefined : "link-why"}
          onClick={() => void start("link")}
        >
          Relay link
        </button>
        {!relayReady && (
          <span id="link-why" class="meta">
            (needs the relay on and connected)
          </span>
        )}
      </div>
      <div aria-live="polite" class="live">
        {problem && (
          <p class="note error" role="alert">
            {problem}
          </p>
        )}
        {paired && <p class="note ok">{paired}</p>}
      </div>
      {offer && (
        <div class="offer" data-testid="pair-offer">
          {left ? (
            <>
              <img class="qr" src={qrDataUrl(offer.url)} alt={`QR code of ${offer.kind === "code" ? "the pairing address" : "the relay pairing link"}`} width={220} height={220} />
              <div class="offer-text">
                <p class="code-label">{offer.kind === "code" ? "Code" : "Its code (inside the link; scan the QR code)"}</p>
                <p class="code" data-testid="pair-code" aria-label={`Pairing code ${offer.code.split("").join(" ")}`}>
                  {offer.code}
                </p>
                <p class="meta">
                  Expires in <span data-testid="pair-expiry">{left}</span>
                </p>
                <p class="meta url">{offer.url}</p>
                {offer.kind === "code" && loopback && (
                  <p class="meta">This page was opened at a loopback address, which a phone cannot reach: open it at this computer's network address to pair over the local network, or use the relay link.</p>
                )}
              </div>
            </>
          ) : (
            <p class="note" role="status">
              This code has expired. Make a new one.
            </p>
          )}
        </div>
      )}
    </section>
  );
}

function Devices({ devices, problem, reload }: { devices: Json[] | null; problem: string; reload(): Promise<unknown> }) {
  const [confirm, setConfirm] = useState<string | null>(null);
  const [notice, setNotice] = useState("");
  const [err, setErr] = useState("");
  const revoke = async (d: Json) => {
    setErr("");
    try {
      await request("device_revoke", { device: d.id });
      setNotice(`Revoked ${String(d.name ?? d.id)}.`);
    } catch (e) {
      setErr(message(e));
    }
    setConfirm(null);
    await reload();
  };
  return (
    <section class="card" aria-labelledby="dev-h" data-testid="devices">
      <h2 id="dev-h">Devices</h2>
      {devices === null && !problem && <p class="meta">Loading…</p>}
      {devices?.length === 0 && <p class="empty">No paired devices.</p>}
      {devices && devices.length > 0 && (
        <ul class="items">
          {devices.map((d) => (
            <li key={d.id}>
              <div class="what">
                <span class="name">{String(d.name ?? d.id)}</span>
                <span class="meta">
                  {d.kind === "relay" ? "through the relay" : "on the network"} · paired {when(d.paired_at)}
                  {d.last_seen ? ` · last seen ${when(d.last_seen)}` : ""}
                </span>
              </div>
              {confirm === d.id ? (
                <span class="confirm" role="group" aria-label={`Revoke ${String(d.name)}?`}>
                  <span>It is disconnected now and cannot reconnect.</span>
                  <button type="button" class="danger" onClick={() => void revoke(d)}>
                    Revoke
                  </button>
                  <button type="button" onClick={() => setConfirm(null)}>
                    Cancel
                  </button>
                </span>
              ) : (
                <button type="button" class="small" aria-label={`Revoke ${String(d.name ?? d.id)}`} onClick={() => setConfirm(d.id)}>
                  Revoke
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      <div aria-live="polite" class="live">
        {(problem || err) && (
          <p class="note error" role="alert">
            {problem || err}
          </p>
        )}
        {notice && <p class="note ok">{notice}</p>}
      </div>
    </section>
  );
}

function RelaySection({ relay, setRelay, reload }: { relay: Relay | null; setRelay(r: Relay): void; reload(): Promise<void> }) {
  const [problem, setProblem] = useState("");
  const [busy, setBusy] = useState(false);
  // A relay that is on but not yet connected is asked again until it says.
  useEffect(() => {
    if (!relay?.enabled || relay.connected) return;
    const t = setInterval(() => void reload(), 3000);
    return () => clearInterval(t);
  }, [relay?.enabled, relay?.connected]);
  const set = async (enabled: boolean) => {
    setBusy(true);
    setProblem("");
    try {
      setRelay((await request("relay_set", { enabled })) as unknown as Relay);
    } catch (e) {
      setProblem(message(e));
    }
    setBusy(false);
  };
  const state = !relay
    ? "Unknown"
    : !relay.enabled
      ? "Off"
      : relay.connected
        ? "On, connected"
        : "On, connecting…";
  return (
    <section class="card" aria-labelledby="relay-h" data-testid="relay">
      <h2 id="relay-h">Relay</h2>
      <p class="meta">The relay lets a paired phone reach this computer from anywhere, end-to-end encrypted. It also carries notifications.</p>
      <p role="status" data-testid="relay-state">
        <span class={`dot ${relay?.connected ? "on" : relay?.enabled ? "wait" : "off"}`} aria-hidden="true" />
        {state}
        {relay?.host ? ` as ${relay.host}` : ""}
      </p>
      {relay?.url && <p class="meta url">{relay.url}</p>}
      {relay && relay.url === null && (
        <p class="meta">This daemon was started with --no-relay, so the relay stays off whatever is set here.</p>
      )}
      <button type="button" disabled={!relay || busy} onClick={() => void set(!relay?.enabled)}>
        {relay?.enabled ? "Turn the relay off" : "Turn the relay on"}
      </button>
      {problem && (
        <p class="note error" role="alert">
          {problem}
        </p>
      )}
    </section>
  );
}

// ---- Paired pages: notifications ---------------------------------------------------------

function Notifications() {
  const [on, setOn] = useState(false);
  const [why, setWhy] = useState<string | null>(null);
  const [status, setStatus] = useState("");
  const [problem, setProblem] = useState("");
  const [results, setResults] = useState<PushResult[] | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const unsupported = pushUnsupported();
    if (unsupported) {
      setWhy(unsupported);
      return;
    }
    void fetchPushKey().then((k) => {
      if (!k) setWhy("Notifications need the relay: they can be turned on only on a page opened through the relay (its address serves the push key). This page came straight from the computer.");
    });
    void currentSubscription()
      .then((s) => setOn(!!s && localStorage.getItem(KEY_PUSH_ON) === "1"))
      .catch(() => {});
  }, []);
  const run = async (what: () => Promise<void>) => {
    setBusy(true);
    setProblem("");
    try {
      await what();
    } catch (e) {
      setProblem(message(e));
    }
    setBusy(false);
  };
  return (
    <section class="card" aria-labelledby="push-h" data-testid="notifications">
      <h2 id="push-h">Notifications</h2>
      {why && (
        <p class="note" data-testid="push-why">
          {why}
        </p>
      )}
      <p class="meta">
        {on ? "Notifications are on for this browser." : "Notifications are off for this browser."} They pass through the relay, which can read them.
      </p>
      <div class="buttons">
        {on ? (
          <button
            type="button"
            disabled={busy}
            onClick={() =>
              void run(async () => {
                await disablePush();
                setOn(false);
                setStatus("Notifications turned off.");
              })
            }
          >
            Turn notifications off
          </button>
        ) : (
          <button
            type="button"
            class="primary"
            disabled={busy || !!why}
            onClick={() =>
              void run(async () => {
                await enablePush();
                setOn(true);
                setStatus("Notifications are on.");
              })
            }
          >
            Enable notifications
          </button>
        )}
        <button
          type="button"
          disabled={busy}
          onClick={() =>
            void run(async () => {
              setResults(null);
              setResults(await testPush());
            })
          }
        >
          Send a test
        </button>
      </div>
      <div aria-live="polite" class="live" data-testid="push-results">
        {status && <p class="note ok">{status}</p>}
        {problem && (
          <p class="note error" role="alert">
            {problem}
          </p>
        )}
        {results && results.length === 0 && <p class="note">This device has no notification subscription on the computer: enable notifications first.</p>}
        {results && results.length > 0 && (
          <ul class="results">
            {results.map((r, i) => {
              const d = describeResult(r);
              return (
                <li key={i} class={d.ok ? "ok" : "error"}>
                  {d.text}
                </li>
              );
            })}
          </ul>
        )}
      </div>
    </section>
  );
}

// ---- This page ---------------------------------------------------------------------------

function ThisPage() {
  const access = useStore((s) => s.access);
  const version = useStore((s) => s.version);
  const [confirm, setConfirm] = useState(false);
  return (
    <section class="card" aria-labelledby="page-h">
      <h2 id="page-h">This page</h2>
      <p class="meta">
        {access === "local" ? "Signed in as this computer's desktop (full powers)." : access === "relay" ? "Paired through the relay." : "Paired on the network."}
        {version && ` Daemon ${version}.`}
      </p>
      {access !== "local" &&
        (confirm ? (
          <span class="confirm" role="group" aria-label="Forget this computer?">
            <span>This browser forgets its pairing; you will need a new code.</span>
            <button
              type="button"
              class="danger"
              onClick={() => {
                forgetAll();
                location.assign("/remote");
              }}
            >
              Forget
            </button>
            <button type="button" onClick={() => setConfirm(false)}>
              Cancel
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => setConfirm(true)}>
            Forget this computer
          </button>
        ))}
    </section>
  );
}
