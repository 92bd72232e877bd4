/**
 * `npm run devnet`: the devnet's chains alone (no facilitator), until
 * Ctrl-C: the base family's chains (`BASE_DEVNET` of devnet/families.ts,
 * always) and the local ledger of every other family listed, each started
 * through its descriptor as devnet mode starts it (devnet/serviceMode.ts).
 *
 *   npm run devnet -- [--networks <CAIP-2 id>,<CAIP-2 id> | all]
 *                     [--block-time <seconds, 0 = one block per tx>]
 *                     [--payers N] [--out .devnet/devnet.json]
 *
 * "all" is every network the devnet can run, of every family; the summary
 * says what a token of one of them asks of a payer before paying.
 * `--block-time` and `--payers` are the base family's; the other ledgers
 * keep their own pace (a public chain's) and payers.
 *
 * Environment: DEVNET_NETWORKS and DEVNET_BLOCK_TIME stand in for the flags
 * (flags win), DEVNET_FILE for --out: the same variables `npm start` reads,
 * so `DEVNET_NETWORKS=eip155:8453,near:mainnet npm run devnet` runs what
 * that `npm start` would. Progress and the summary go to stderr; a bad
 * argument exits with status 2 before anything starts.
 */
import { parseArgs } from "node:util";
import { DEFAULT_DEVNET_FILE, addDevnetNetwork } from "./devnetFile.js";
import {
  BASE_DEVNET,
  bootLedger,
  devnetFamilies,
  type RunningBase,
  type RunningLedger,
} from "./families.js";

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
  const ledgers = devnetFamilies().map(([, family]) => family.network);
  const valid = [...BASE_DEVNET.allNetworks(), ...ledgers];
  const networks =
    networksArg === "all"
      ? valid
      : networksArg
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
  const unknown = networks.filter((id) => !valid.includes(id));
  if (unknown.length > 0) {
    usageError(
      `unknown network ${unknown.map((id) => `"${id}"`).join(", ")}; valid: ${valid.join(", ")} (or "all")`,
    );
  }
  try {
    BASE_DEVNET.checkNetworks(BASE_DEVNET.networks(networks));
    if (new Set(networks).size !== networks.length) {
      throw new Error(`duplicate network in ${networks.join(",")}`);
    }
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

function printSummary(devnet: RunningBase, ledgers: readonly RunningLedger[], out: string): void {
  say("");
  say(
    `devnet running (${devnet.file.blockTimeSeconds === 0 ? "one block per transaction" : `block time ${devnet.file.blockTimeSeconds}s`}); Ctrl-C to stop`,
  );
  for (const line of BASE_DEVNET.summary(devnet, out)) say(line);
  for (const ledger of ledgers) say(`  ${ledger.network.padEnd(16)} ${ledger.banner}`);
}

const { networks, blockTime, payers, out } = parseCli();
// What started so far, stopped together (the last first) on Ctrl-C or when a later part fails.
const started: { stop(): Promise<unknown> }[] = [];
const stopAll = async (): Promise<void> => {
  for (const part of started.reverse()) await part.stop();
};
let devnet: RunningBase;
const ledgers: RunningLedger[] = [];
try {
  devnet = await BASE_DEVNET.start({
    networks: BASE_DEVNET.networks(networks),
    blockTimeSeconds: blockTime,
    payers,
    outFile: out,
    progress: say,
  });
  started.push(devnet);
  for (const [, family] of devnetFamilies()) {
    if (!networks.includes(family.network)) continue;
    say(`starting ${family.what} for ${family.network}…`);
    const ledger = await bootLedger(family);
    started.push(ledger);
    await addDevnetNetwork(out, family.network, ledger.info);
    ledgers.push(ledger);
  }
} catch (e) {
  // A start that fails has already stopped whatever it started; the parts before it are stopped here.
  say(`devnet: ${e instanceof Error ? e.message : String(e)}`);
  await stopAll().catch(() => undefined);
  process.exit(1);
}
printSummary(devnet, ledgers, out);

// Our own handlers: the chains' nodes then leave shutdown to us, and get a
// clean SIGTERM instead of a SIGKILL.
let shuttingDown = false;
const shutdown = (signal: NodeJS.Signals): void => {
  if (shuttingDown) return; // a second Ctrl-C while stopping changes nothing
  shuttingDown = true;
  say(`\n${signal}: stopping devnet…`);
  stopAll().then(
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
