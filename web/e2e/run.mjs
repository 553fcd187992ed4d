// Runs the browser scenarios (`*.e2e.mjs` here), one after another, and exits non-zero when
// any fails. `node --experimental-websocket e2e/run.mjs [filter]`; `cargo xtask browser`
// builds what it needs first. Each scenario module exports `scenarios`: [{ name, run }],
// where run gets a fresh browser and a temporary home and throws to fail.
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { launchBrowser, tempHome } from "./harness.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2] ?? "";
const files = readdirSync(here).filter((n) => n.endsWith(".e2e.mjs")).sort();
let failed = 0;
let ran = 0;
for (const file of files) {
  const mod = await import(pathToFileURL(join(here, file)).href);
  for (const s of mod.scenarios ?? []) {
    const name = `${file.replace(".e2e.mjs", "")}: ${s.name}`;
    if (filter && !name.includes(filter)) continue;
    ran += 1;
    const started = Date.now();
    const home = tempHome();
    const browser = await launchBrowser();
    const cleanup = [];
    try {
      await s.run({ browser, home, cleanup });
      console.log(`PASS ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    } catch (e) {
      failed += 1;
      console.log(`FAIL ${name}\n  ${String(e?.stack ?? e).replace(/\n/g, "\n  ")}`);
    } finally {
      for (const c of cleanup.reverse()) await Promise.resolve(c()).catch(() => {});
      await browser.close().catch(() => {});
      home.remove();
    }
  }
}
console.log(`browser: ${ran - failed} of ${ran} scenarios passed`);
process.exit(failed || ran === 0 ? 1 : 0);
