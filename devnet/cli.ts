/**
 * `npm run devnet`: the devnet's base chains only (`BASE_DEVNET` of
 * devnet/families.ts; no facilitator), until Ctrl-C.
 *
 *   npm run devnet -- [--networks <CAIP-2 id>,<CAIP-2 id> | all]
 *                     [--block-time <seconds, 0 = one block per tx>]
 *                     [--payers N] [--out .devnet/devnet.json]
 *
 * "all" is every chain the base family's devnet can run; its summary says
 * what a token of one of them asks of a payer before paying.
 *
 * Environment: DEVNET_NETWORKS and DEVNET_BLOCK_TIME stand in for the flags
 * (flags win), DEVNET_FILE for --out. Progress and the summary go to stderr;
 * a bad argument exits with status 2 before anything starts.
 */
import { parseArgs } from "node:util";
import { DEFAULT_DEVNET_FILE } from "./devnetFile.js";
import { BASE_DEVNET, type RunningBase } from "./families.js";

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

  const networksArg = (
    values.networks ??
    process.env["DEVNET_NETWORKS"] ??
    BASE_DEVNET.networks([]).join(",")
  ).trim();
  const networks =
    networksArg === "all"
      ? BASE_DEVNET.allNetworks()
      : networksArg
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
  try {
    BASE_DEVNET.checkNetworks(networks);
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

function printSummary(devnet: RunningBase, out: string): void {
  say("");
  say(
    `devnet running (${devnet.file.blockTimeSeconds === 0 ? "one block per transaction" : `block time ${devnet.file.blockTimeSeconds}s`}); Ctrl-C to stop`,
  );
  for (const line of BASE_DEVNET.summary(devnet, out)) say(line);
}

const { networks, blockTime, payers, out } = parseCli();
let devnet: RunningBase;
try {
  devnet = await BASE_DEVNET.start({
    networks,
    blockTimeSeconds: blockTime,
    payers,
    outFile: out,
    progress: say,
  });
} catch (e) {
  // A start that fails has already stopped whatever it started.
  say(`devnet: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
printSummary(devnet, out);

// Our own handlers: the chains' nodes then leave shutdown to us, and get a
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
