/**
 * Copies what the compiled service reads at run time but tsc does not emit:
 * the SQL migrations and the devnet's Solidity sources.
 */
import { cpSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

const assets = [
  { from: "src/storage/migrations", to: "dist/src/storage/migrations", ext: ".sql" },
  { from: "devnet/evm/contracts", to: "dist/devnet/evm/contracts", ext: ".sol" },
];
for (const { from, to, ext } of assets) {
  mkdirSync(to, { recursive: true });
  const files = readdirSync(from).filter((f) => f.endsWith(ext));
  for (const f of files) cpSync(join(from, f), join(to, f));
  process.stdout.write(`copied ${files.length} ${ext} files to ${to}\n`);
}
