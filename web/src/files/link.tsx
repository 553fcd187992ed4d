// The way into the file browser from a session (its directory) or a project.
import "./files.css";
import { navigate, routePath } from "../core/route";

export function FilesLink({ path, label }: { path: string; label?: string }) {
  const to = { view: "files" as const, path };
  return (
    <a
      class="files-link"
      href={routePath(to)}
      aria-label={label ?? "Files and changes"}
      onClick={(e) => {
        e.preventDefault();
        navigate(to);
      }}
    >
      Files
    </a>
  );
}
