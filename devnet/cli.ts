/**
 * `npm run devnet`: local chains only (no facilitator), until Ctrl-C.
 *
 *   npm run devnet -- [--networks eip155:8453,eip155:42161 | all]
 *                     [--block-time <seconds, 0 = one block per tx>]
 *                     [--payers N] [--out .devnet/devnet.json]
 *
 * "all" includes eip155:4663, whose USDG moves through Permit2: a payer there
 * must approve Permit2 (0x000000000022D473030F116dDEE9F6B43aC78BA3) on the
 * token once before paying.
 *
 * Environment: DEVNET_NETWORKS and DEVNET_BLOCK_TIME stand in for the flags
 * (flags win), DEVNET_FILE for --out. Progress and the summary go to stderr;
 * a bad argument exits with status 2 before anything starts.
 */
import { parseArgs } from "node:util";
import { privateKeyToAccount } from "viem/accounts";
import { findEvmNetwork } from "../src/chains/evm/networks.js";
import {
  DEFAULT_DEVNET_FILE,
  allDevnetNetworkIds,
  resolveDevnetNetworks,
  startDevnet,
  type Devnet,
} from "./evm/index.js";
import { PERMIT2_ADDRESS } from "./evm/deploy.js";

const say = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

function usageError(message: string): never {
  say(`devnet: ${message}`);
  process.exit(2);
}

function parseCli(): { networks: string[]; blockTime: number; payers: number; out: string } {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        networks: { type: "string" },
        "block-time": { type: "string" },
        payers: { type: "string" },
        out: { type: "string" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    usageError(e instanceof Error ? e.message : String(e));
  }

  const networksArg = (values.networks ?? process.env["DEVNET_NETWORKS"] ?? "eip155:8453").trim();
  const networks =
    networksArg === "all"
      ? allDevnetNetworkIds()
      : networksArg
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
  try {
    resolveDevnetNetworks(networks);
  } catch (e) {
    usageError(e instanceof Error ? e.message : String(e));
  }

  const blockTimeArg = (values["block-time"] ?? process.env["DEVNET_BLOCK_TIME"] ?? "1").trim();
  const blockTime = Number(blockTimeArg);
  if (blockTimeArg === "" || !Number.isFinite(blockTime) || blockTime < 0 || blockTime > 60) {
    usageError(
      `--block-time must be seconds from 0 to 60 (0 = one block per transaction), got "${blockTimeArg}"`,
    );
  }

  const payersArg = values.payers ?? "5";
  const payers = Number(payersArg);
  if (!/^\d+$/.test(payersArg) || payers < 1 || payers > 10_000) {
    usageError(`--payers must be a whole number from 1 to 10000, got "${payersArg}"`);
  }

  const out = values.out ?? process.env["DEVNET_FILE"] ?? DEFAULT_DEVNET_FILE;
  return { networks, blockTime, payers, out };
}

function printSummary(devnet: Devnet, out: string): void {
  say("");
  say(
    `devnet running (${devnet.file.blockTimeSeconds === 0 ? "one block per transaction" : `block time ${devnet.file.blockTimeSeconds}s`}); Ctrl-C to stop`,
  );
  for (const [id, info] of Object.entries(devnet.networks)) {
    const name = findEvmNetwork(id)?.name ?? id;
    const tokens = Object.entries(info.assets)
      .map(([symbol, address]) => `${symbol} ${address}`)
      .join(", ");
    say(`  ${id.padEnd(16)} ${info.rpcUrl.padEnd(24)} ${name}${tokens ? `: ${tokens}` : ""}`);
  }
  const permit2Networks = Object.keys(devnet.networks).filter((id) =>
    findEvmNetwork(id)?.assets.some((a) => a.transferMethod === "permit2"),
  );
  if (permit2Networks.length > 0) {
    say(
      `  Permit2 tokens on ${permit2Networks.join(", ")}: payers approve Permit2 ${PERMIT2_ADDRESS} once`,
    );
  }
  const first = Object.values(devnet.networks)[0];
  const payerKey = first?.payerPrivateKeys[0];
  if (payerKey) {
    say(`  funded payer     ${privateKeyToAccount(payerKey).address} (all keys in ${out})`);
  }
}

const { networks, blockTime, payers, out } = parseCli();
let devnet: Devnet;
try {
  devnet = await startDevnet({
    networks,
    blockTimeSeconds: blockTime,
    payers,
    outFile: out,
    progress: say,
  });
} catch (e) {
  // startDevnet has already stopped whatever it started.
  say(`devnet: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
printSummary(devnet, out);

// Our own handlers: anvil.ts then leaves shutdown to us, and the nodes get a
// clean SIGTERM instead of a SIGKILL.
let shuttingDown = false;
const shutdown = (signal: NodeJS.Signals): void => {
  if (shuttingDown) return; // a second Ctrl-C while stopping changes nothing
  shuttingDown = true;
  say(`\n${signal}: stopping devnet…`);
  devnet.stop().then(
    () => process.exit(0),
    (e: unknown) => {
      say(`devnet: stop failed: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
process.on("SIGHUP", shutdown);
