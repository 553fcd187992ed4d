// The remote page: decide how to reach the daemon, connect, draw.
import { render } from "preact";
import "./styles/base.css";
import { decideAccess, pairWithCode } from "./core/auth";
import { startDaemon } from "./core/daemon";
import { directOpener } from "./core/transport";
import { store } from "./core/store";
import { App } from "./ui/app";
import { Welcome } from "./ui/welcome";
import { applyTheme } from "./ui/theme";
import { KEY_DEVICE_TOKEN, KEY_LOCAL_TOKEN } from "./core/auth";
import { setupFromFragment, setupFromStorage } from "./relay/pairing";
import { relayOpener } from "./relay/socket";

applyTheme();

async function boot(root: HTMLElement): Promise<void> {
  const access = decideAccess();
  switch (access.kind) {
    case "pair":
      try {
        await pairWithCode(access.code);
      } catch (e) {
        render(<Welcome error={(e as Error).message} />, root);
        return;
      }
      store.set({ access: "device" });
      startDaemon(directOpener(() => localStorage.getItem(KEY_DEVICE_TOKEN)));
      break;
    case "local":
      store.set({ access: "local" });
      startDaemon(directOpener(() => localStorage.getItem(KEY_LOCAL_TOKEN)));
      break;
    case "device":
      store.set({ access: "device" });
      startDaemon(directOpener(() => localStorage.getItem(KEY_DEVICE_TOKEN)));
      break;
    case "relay":
    case "relay-pair": {
      // The relay serves this page, so the page's origin is the relay's.
      const setup =
        access.kind === "relay-pair" ? setupFromFragment(access.fragment, location.origin) : setupFromStorage();
      if (!setup) {
        render(<Welcome error="This pairing link is not valid. Open a new one from the computer." />, root);
        return;
      }
      store.set({ access: "relay" });
      startDaemon(relayOpener(setup));
      break;
    }
    case "none":
      render(<Welcome />, root);
      return;
  }
  render(<App />, root);
}

const root = document.getElementById("app");
if (root) void boot(root);

if ("serviceWorker" in navigator && location.protocol !== "file:") {
  navigator.serviceWorker.register("/remote/sw.js", { scope: "/remote/" }).catch(() => {});
}
