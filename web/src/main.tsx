// The remote page: decide how to reach the daemon, connect, draw.
import { render } from "preact";
import "./styles/base.css";
import { decideAccess, pairErrorText, pairWithCode } from "./core/auth";
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

/** A paired page: connect with the device token and draw the app. */
function startDevice(root: HTMLElement): void {
  store.set({ access: "device" });
  startDaemon(directOpener(() => localStorage.getItem(KEY_DEVICE_TOKEN)));
  render(<App />, root);
}

async function boot(root: HTMLElement): Promise<void> {
  const access = decideAccess();
  switch (access.kind) {
    case "pair":
      try {
        await pairWithCode(access.code);
      } catch (e) {
        render(<Welcome error={pairErrorText(e)} code={access.code} onPaired={() => startDevice(root)} />, root);
        return;
      }
      startDevice(root);
      return;
    case "local":
      store.set({ access: "local" });
      startDaemon(directOpener(() => localStorage.getItem(KEY_LOCAL_TOKEN)));
      break;
    case "device":
      startDevice(root);
      return;
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
      render(<Welcome onPaired={() => startDevice(root)} />, root);
      return;
  }
  render(<App />, root);
}

const root = document.getElementById("app");
if (root) void boot(root);

if ("serviceWorker" in navigator && location.protocol !== "file:") {
  navigator.serviceWorker.register("/remote/sw.js", { scope: "/remote/" }).catch(() => {});
}
