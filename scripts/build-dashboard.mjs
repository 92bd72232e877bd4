#!/usr/bin/env node
// Builds the dashboard (dashboard/ -> dashboard/dist) with Vite.
//
//   node scripts/build-dashboard.mjs             build now
//   node scripts/build-dashboard.mjs --if-stale  build only when dist is missing or older
//                                                than a source file (what `npm start` runs)
//
// A production install without dev dependencies has no Vite: then an
// existing build is served as it is, and a missing one is reported, not fatal.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../dashboard/", import.meta.url));
const built = join(root, "dist", "index.html");

function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "dist" || entry.name === "node_modules") continue;
    const p = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(p) : statSync(p).mtimeMs);
  }
  return newest;
}

const ifStale = process.argv.includes("--if-stale");
if (ifStale && existsSync(built) && statSync(built).mtimeMs >= newestSource(root)) process.exit(0);

let vite;
try {
  vite = await import("vite");
} catch {
  process.stderr.write(
    existsSync(built)
      ? "dashboard: sources changed but Vite is not installed (npm install); serving the existing build\n"
      : "dashboard: not built and Vite is not installed; run `npm install && npm run dashboard:build` to serve /dashboard/\n",
  );
  process.exit(0);
}
const started = Date.now();
process.stderr.write("dashboard: building with Vite…\n");
await vite.build({ configFile: join(root, "vite.config.ts"), logLevel: "warn" });
process.stderr.write(`dashboard: built in ${Date.now() - started} ms\n`);
