/**
 * Runs the local Solana ledger as a process of its own (as anvil runs):
 * prints one JSON line (`{"ready":true, …the network's devnet entry}`) once it
 * serves, and exits cleanly on SIGTERM or SIGINT.
 *
 *   node --import tsx devnet/svm/main.ts ['{"slotMs":400}']
 */
import { startSolanaLedger, type SolanaDevnetOptions } from "./index.js";

const raw = (process.argv[2] ? JSON.parse(process.argv[2]) : {}) as Record<string, unknown>;
const opts: SolanaDevnetOptions = {
  ...(typeof raw["slotMs"] === "number" ? { slotMs: raw["slotMs"] } : {}),
  ...(typeof raw["payers"] === "number" ? { payers: raw["payers"] } : {}),
  ...(typeof raw["feePayers"] === "number" ? { feePayers: raw["feePayers"] } : {}),
  ...(typeof raw["port"] === "number" ? { port: raw["port"] } : {}),
  ...(typeof raw["payerUsdc"] === "string" ? { payerUsdc: BigInt(raw["payerUsdc"]) } : {}),
};
const running = await startSolanaLedger(opts);
process.stdout.write(`${JSON.stringify({ ready: true, ...running.info })}\n`);
const stop = () => void running.stop().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
