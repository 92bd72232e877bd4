/**
 * Compiles the devnet contracts into the cache and exits (see
 * compileInChild in compile.ts: solc's memory leaves with this process).
 */
import { compileToCache } from "./compile.js";

try {
  await compileToCache();
} catch (e) {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
}
