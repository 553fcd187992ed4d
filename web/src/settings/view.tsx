// This computer: workspaces, and on the desktop pairing, devices and the relay.
export function SettingsView() {
  return (
    <section aria-labelledby="settings-h">
      <h1 id="settings-h">Settings</h1>
    </section>
  );
}
