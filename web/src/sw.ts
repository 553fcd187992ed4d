// The service worker: Web Push notifications and opening the page they point at. It caches
// nothing: the page is small and always comes from the daemon.
/// <reference lib="webworker" />
const sw = self as unknown as ServiceWorkerGlobalScope;

sw.addEventListener("install", () => void sw.skipWaiting());
sw.addEventListener("activate", (e) => e.waitUntil(sw.clients.claim()));

sw.addEventListener("push", (e) => {
  let data: { title?: string; body?: string; tag?: string; url?: string } = {};
  try {
    data = e.data?.json() ?? {};
  } catch {
    data = { body: e.data?.text() ?? "" };
  }
  e.waitUntil(
    sw.registration.showNotification(String(data.title ?? "jucode"), {
      body: String(data.body ?? ""),
      tag: data.tag,
      data: { url: typeof data.url === "string" && data.url.startsWith("/") ? data.url : "/remote" },
    }),
  );
});

sw.addEventListener("notificationclick", (e) => {
  e.notification.close();
  const url = (e.notification.data as { url?: string } | null)?.url ?? "/remote";
  e.waitUntil(
    // Uncontrolled windows too: a page loaded at `/remote` itself is outside the scope `/remote/`.
    sw.clients.matchAll({ type: "window", includeUncontrolled: true }).then((wins) => {
      for (const w of wins) {
        const path = new URL(w.url).pathname;
        if (path !== "/remote" && !path.startsWith("/remote/")) continue;
        // navigate() works only on a window this worker controls; otherwise focusing is all.
        return w
          .focus()
          .then((c) => (new URL(c.url).pathname === url ? c : c.navigate(url).catch(() => c)))
          .then(() => undefined);
      }
      return sw.clients.openWindow(url).then(() => undefined);
    }),
  );
});
