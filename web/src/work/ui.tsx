// Small pieces the work views share: the status badge, and the op state every view uses.
import { useStore } from "../core/store";
import { projectChoices, statusLabel } from "./model";

export { ErrorLine, useOp } from "../ui/op";

export function StatusBadge({ status }: { status: unknown }) {
  return <span class={`badge wstatus-${String(status).replace(/[^a-z-]/g, "")}`}>{statusLabel(status)}</span>;
}


/** The project a requirement belongs to: one of the workspaces' projects, or none (""). */
export function ProjectSelect({ id, value, onChange }: { id: string; value: string; onChange: (v: string) => void }) {
  const workspaces = useStore((s) => s.workspaces);
  return (
    <label>
      <span id={id}>Project</span>
      <select aria-labelledby={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">No project</option>
        {projectChoices(workspaces).map((p) => (
          <option key={p.id} value={p.id}>
            {p.label}
          </option>
        ))}
      </select>
    </label>
  );
}
