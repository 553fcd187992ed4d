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
    sw.clients.matchAll({ type: "window" }).then((wins) => {
      for (const w of wins) if ("focus" in w) return (w as WindowClient).navigate(url).then((c) => c?.focus());
      return sw.clients.openWindow(url).then(() => undefined);
    }),
  );
});
