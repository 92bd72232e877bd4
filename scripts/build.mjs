#!/usr/bin/env node
// Compiles the service to dist/ (`npm run build`; `npm start` calls it when
// dist/ is missing or older than a source file).
//
//   node scripts/build.mjs             build now
//   node scripts/build.mjs --if-stale  build only when a source changed since the last build
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
export const entry = join(root, "dist", "src", "main.js");
// Written only after a complete build, so an interrupted one is redone.
const stamp = join(root, "dist", ".built");
const sources = ["src", "devnet", "bench/reference", "tsconfig.json", "tsconfig.build.json"];

function newest(path) {
  if (!existsSync(path)) return 0;
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  let latest = 0;
  for (const e of readdirSync(path, { withFileTypes: true })) {
    if (e.name === "node_modules") continue;
    latest = Math.max(latest, newest(join(path, e.name)));
  }
  return latest;
}

export function isStale() {
  if (!existsSync(stamp) || !existsSync(entry)) return true;
  const built = statSync(stamp).mtimeMs;
  return sources.some((s) => newest(join(root, s)) > built);
}

/** Builds dist/; without TypeScript (a production install) an existing build is kept. */
export function build() {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  if (!existsSync(tsc)) {
    if (existsSync(entry)) {
      process.stderr.write(
        "build: sources changed but TypeScript is not installed (npm install); keeping the existing dist/\n",
      );
      return;
    }
    process.stderr.write(
      "build: dist/ is not built and TypeScript is not installed; run `npm install` first\n",
    );
    process.exit(1);
  }
  const started = Date.now();
  process.stderr.write("build: compiling the service to dist/ (once per change)…\n");
  // A clean build: nothing of a deleted source (a migration, say) survives.
  rmSync(join(root, "dist"), { recursive: true, force: true });
  const steps = [
    [tsc, "-p", "tsconfig.build.json"],
    [join(root, "scripts", "copy-build-assets.mjs")],
  ];
  for (const args of steps) {
    const r = spawnSync(process.execPath, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"],
      encoding: "utf8",
    });
    if (r.status !== 0) {
      // tsc prints its errors on stdout.
      process.stderr.write(`${r.stdout ?? ""}build: failed (${args.join(" ")})\n`);
      process.exit(1);
    }
  }
  writeFileSync(stamp, `${new Date().toISOString()}\n`);
  process.stderr.write(`build: compiled in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (!process.argv.includes("--if-stale") || isStale()) build();
}
