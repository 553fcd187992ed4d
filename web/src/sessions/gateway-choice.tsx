// The new-session form's gateway choice for Claude Code and Codex: once the daemon's
// `gateway_catalog` lists groups (the machine is signed in to a JuCode account and the
// gateway answered), the session can start on the gateway with one of the groups' models.
// `onChange` gets the options to merge into `session_create`'s `options`.
import { useEffect, useState } from "preact/hooks";
import { request } from "../core/daemon";
import type { Json } from "../core/store";

interface Group {
  id: string;
  name: string;
  multiplier: number;
  models: string[];
}

/** The catalog's groups, asked once per page load; an error counts as "no gateway". */
let groupsOnce: Promise<Group[]> | null = null;

function groups(): Promise<Group[]> {
  groupsOnce ??= request("gateway_catalog", {})
    .then((r) => (Array.isArray(r.groups) ? (r.groups as unknown[]) : []).filter(isGroup))
    .catch(() => []);
  return groupsOnce;
}

function isGroup(g: unknown): g is Group {
  const x = g as Json;
  return !!x && typeof x.id === "string" && typeof x.name === "string" && typeof x.multiplier === "number" && Array.isArray(x.models) && x.models.every((m) => typeof m === "string");
}

export function GatewayChoice({ engine, onChange }: { engine: string; onChange: (options: Json) => void }) {
  const [list, setList] = useState<Group[]>([]);
  const [on, setOn] = useState(false);
  const [model, setModel] = useState("");
  const takes = engine === "claude" || engine === "codex";
  useEffect(() => {
    if (!takes) return;
    let live = true;
    void groups().then((g) => live && setList(g));
    return () => {
      live = false;
    };
  }, [takes]);
  useEffect(() => {
    onChange(takes && on ? (model ? { jucode_gateway: true, model } : { jucode_gateway: true }) : {});
  }, [takes, on, model]);
  if (!takes || list.length === 0) return null;
  return (
    <fieldset class="gateway-choice">
      <legend>JuCode gateway</legend>
      <label>
        <input type="checkbox" checked={on} onChange={(e) => setOn(e.currentTarget.checked)} /> Run through the gateway
      </label>
      {on && (
        <label>
          <span id="ns-gw-model">Model</span>
          <select aria-labelledby="ns-gw-model" value={model} onChange={(e) => setModel(e.currentTarget.value)}>
            <option value="">The engine's default</option>
            {list.map((g) => (
              <optgroup key={g.id} label={`${g.name} (×${g.multiplier})`}>
                {g.models.map((m) => (
                  <option key={`${g.id}/${m}`} value={m}>
                    {m}
                  </option>
                ))}
              </optgroup>
            ))}
          </select>
        </label>
      )}
    </fieldset>
  );
}
