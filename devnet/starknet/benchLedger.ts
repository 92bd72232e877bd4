/**
 * The Starknet bench's local node, on a thread of its own (see bench.ts):
 * the same ledger and RPC server the devnet runs, started here, answering
 * the bench's balance reads. Loaded only by the benchmarks.
 */
import { parentPort, workerData } from "node:worker_threads";
import { STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import { startStarknetLedger, type StarknetDevnetOptions } from "./index.js";

type Running = Awaited<ReturnType<typeof startStarknetLedger>>;

export type ToLedger = { kind: "balance"; id: number; account: string } | { kind: "stop" };

export type FromLedger =
  | { kind: "ready"; info: Running["info"]; executors: Running["executors"] }
  | { kind: "balance"; id: number; value: string }
  | { kind: "stopped" };

const port = parentPort;
if (!port) throw new Error("benchLedger.ts runs only as a worker thread");
const send = (message: FromLedger) => port.postMessage(message);

const running = await startStarknetLedger(workerData as StarknetDevnetOptions);
port.on("message", (message: ToLedger) => {
  if (message.kind === "balance") {
    const value = running.ledger.balanceOf(STARKNET_USDC, message.account).toString();
    send({ kind: "balance", id: message.id, value });
    return;
  }
  void running.stop().finally(() => {
    send({ kind: "stopped" });
    port.close();
  });
});
send({ kind: "ready", info: running.info, executors: running.executors });
