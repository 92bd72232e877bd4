// The dead-code gate (`npm run knip`, run by `npm test`): files nothing
// reaches, exports nothing imports, dependencies nothing uses. What is dead
// is removed, not listed here; the ignore lists hold only what knip cannot
// see, each with its reason.
import type { KnipConfig } from "knip";

const config: KnipConfig = {
  // Found without being listed (knip reads them itself):
  //   - package.json scripts: src/main.ts (dev), src/cli/keys.ts (keys),
  //     devnet/cli.ts (devnet), bench/run.ts and bench/catalog-cli.ts (bench),
  //     chaos/run.ts (chaos);
  //   - the dashboard, through the Vite plugin: dashboard/vite.config.ts and
  //     dashboard/index.html's src/main.tsx. The dashboard is included, not
  //     ignored: it is part of the repository that `npm run typecheck` checks.
  entry: [
    // Worker threads, started by name through siblingWorker (src/lib/siblingEntry.ts).
    "src/facilitator/verifyThread.ts",
    "src/storage/pgliteWorker.ts",
    // Processes started by path: the contract compiler (siblingEntry) and the Solana ledger.
    "devnet/evm/compileChild.ts",
    "devnet/svm/main.ts",
    // The public client API: what resource servers and their customers import
    // (README, src/clients/); its exports are used outside this repository.
    "src/clients/**/*.ts",
    "src/chains/*/clients/*.ts",
    // Run by hand or by the benchmark (the reference servers, compiled, by path).
    "bench/profile-summary.ts",
    "bench/reference/server.ts",
    "bench/reference/svmServer.ts",
    // The side-by-side benchmarks, found by their folder (bench/sideBySide.ts).
    "bench/*/sideBySide.ts",
    "scripts/*.mjs",
    "examples/*.ts",
    // Every test file (scripts/run-tests.mjs finds them by name).
    "**/*.test.ts",
  ],
  ignoreDependencies: [
    // Imported by the devnet's Solidity contracts (devnet/evm/contracts/*.sol), compiled by solc.
    "@openzeppelin/contracts",
    "@openzeppelin/confidential-contracts",
    "@fhevm/solidity",
    // Artifacts read with a computed require() path (devnet/evm/fhevm.ts).
    "@fhevm/host-contracts",
    // The anvil binary, found through its platform package's name (devnet/evm/anvil.ts).
    "@foundry-rs/anvil",
  ],
};

export default config;
