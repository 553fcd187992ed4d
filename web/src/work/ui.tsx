// Small pieces the work views share: the status badge, and the op state every view uses.
import { statusLabel } from "./model";

export { ErrorLine, useOp } from "../ui/op";

export function StatusBadge({ status }: { status: unknown }) {
  return <span class={`badge wstatus-${String(status).replace(/[^a-z-]/g, "")}`}>{statusLabel(status)}</span>;
}

