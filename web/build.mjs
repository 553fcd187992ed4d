// Builds the remote page into ../crates/jucode-web/assets (the files the daemon embeds).
//
//   node build.mjs            build into the assets directory
//   node build.mjs --check    build into a temporary directory and fail when the committed
//                             assets differ (what `cargo xtask tidy` runs)
//   node build.mjs --out DIR  build a directory for `jucode-daemon --web DIR`: the files under
//                             DIR/remote/ (where the page asks for them) and the page at
//                             DIR/index.html
//   node build.mjs --unit     bundle test/*.test.ts and run them with node --test
//
// The output must depend only on the sources and the locked dependencies: no timestamps, no
// absolute paths, no hashes of the machine. That is what lets tidy compare it byte for byte.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, mkdirSync, writeFileSync, copyFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const assets = resolve(here, "../crates/jucode-web/assets");
// Files copied as they are, from src/static.
const STATIC = join(here, "src/static");

const common = {
  bundle: true,
  minify: true,
  legalComments: "none",
  target: ["es2022", "chrome110", "safari16", "firefox115"],
  charset: "utf8",
  logLevel: "warning",
  absWorkingDir: here,
  jsx: "automatic",
  jsxImportSource: "preact",
};

async function buildInto(out) {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  await build({ ...common, entryPoints: { app: "src/main.tsx" }, outdir: out, format: "esm" });
  await build({ ...common, entryPoints: { sw: "src/sw.ts" }, outdir: out, format: "iife" });
  // xterm, loaded by the page only when a terminal opens (term.js + term.css).
  await build({ ...common, entryPoints: { term: "src/term/xterm.ts" }, outdir: out, format: "esm" });
  for (const name of readdirSync(STATIC).sort()) copyFileSync(join(STATIC, name), join(out, name));
}

function listFiles(dir) {
  return existsSync(dir) ? readdirSync(dir).filter((n) => n !== "README.md").sort() : [];
}

async function check() {
  const out = mkdtempSync(join(tmpdir(), "jucode-web-"));
  try {
    await buildInto(out);
    const fresh = listFiles(out);
    const committed = listFiles(assets);
    const problems = [];
    for (const name of new Set([...fresh, ...committed])) {
      if (!fresh.includes(name)) problems.push(`${name} is committed but no longer built`);
      else if (!committed.includes(name)) problems.push(`${name} is built but not committed`);
      else if (!readFileSync(join(out, name)).equals(readFileSync(join(assets, name))))
        problems.push(`${name} differs from a fresh build`);
    }
    if (problems.length) {
      for (const p of problems) console.error(`web: ${p}`);
      console.error("web: run `cargo xtask web` and commit crates/jucode-web/assets");
      process.exit(1);
    }
    console.log(`web: the committed bundle matches its source (${fresh.length} files)`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

async function unit() {
  const out = join(here, "node_modules/.unit");
  rmSync(out, { recursive: true, force: true });
  const tests = readdirSync(join(here, "test")).filter((n) => n.endsWith(".test.ts")).sort();
  await build({
    ...common,
    minify: false,
    entryPoints: tests.map((t) => join("test", t)),
    outdir: out,
    outExtension: { ".js": ".mjs" },
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: "inline",
  });
  const files = readdirSync(out).filter((n) => n.endsWith(".mjs")).map((n) => join(out, n));
  const r = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
  process.exit(r.status ?? 1);
}

const args = process.argv.slice(2);
if (args[0] === "--check") await check();
else if (args[0] === "--unit") await unit();
else if (args[0] === "--out") {
  const dir = resolve(args[1]);
  rmSync(dir, { recursive: true, force: true });
  await buildInto(join(dir, "remote"));
  copyFileSync(join(dir, "remote", "index.html"), join(dir, "index.html"));
}
else if (args.length === 0) {
  await buildInto(assets);
  writeFileSync(join(assets, "README.md"), "Built by `cargo xtask web` from `web/`; do not edit. `cargo xtask tidy` checks these match a fresh build.\n");
} else {
  console.error(`unknown arguments: ${args.join(" ")}`);
  process.exit(2);
}
