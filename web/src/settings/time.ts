/** m:ss left until `at` (ms since the epoch), or null once it has passed. */
export function countdown(at: number, now: number): string | null {
  const left = Math.ceil((at - now) / 1000);
  if (!Number.isFinite(left) || left <= 0) return null;
  return `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
}
