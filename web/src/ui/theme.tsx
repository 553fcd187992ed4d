// Dark and light themes: the system's choice unless the user picked one here.
import { useState } from "preact/hooks";

const KEY = "jucode-theme";
type Theme = "system" | "light" | "dark";

export function applyTheme(t: Theme = (localStorage.getItem(KEY) as Theme) ?? "system"): void {
  if (t === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}

export function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>(() => (localStorage.getItem(KEY) as Theme) ?? "system");
  const next: Record<Theme, Theme> = { system: "dark", dark: "light", light: "system" };
  return (
    <button
      type="button"
      class="theme"
      aria-label={`Theme: ${theme}. Switch to ${next[theme]}`}
      onClick={() => {
        const t = next[theme];
        localStorage.setItem(KEY, t);
        applyTheme(t);
        setTheme(t);
      }}
    >
      {theme === "dark" ? "☾" : theme === "light" ? "☀" : "◐"}
    </button>
  );
}
