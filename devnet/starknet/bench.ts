/**
 * The Starknet side of the settle benchmark (bench/families.ts): the local
 * Starknet with a few payers (an outside execution carries a random nonce of
 * the payer's choosing, so a payer signs many payments), two executors for
 * the service, and the project's own client scheme. Loaded only by the
 * benchmarks.
 *
 * The node runs on a thread of its own (benchLedger.ts), off the load
 * generator's, as a Starknet node runs on a machine of its own: its
 * signature checks and Poseidon hashing, in JavaScript, would otherwise
 * hold the thread that times the service's answers.
 */
import { Account, RpcProvider } from "starknet";
import { ExactStarknetClientScheme } from "../../src/chains/starknet/clients/exactClient.js";
import { siblingWorker } from "../../src/lib/siblingEntry.js";
import { answersById, firstMessage } from "../benchThreads.js";
import type { BenchLedger } from "../family.js";
import type { FromLedger, ToLedger } from "./benchLedger.js";
import { STARKNET_MAINNET, type RunningStarknet, type StarknetDevnetOptions } from "./index.js";

export async function starknetBench(
  payments: number,
  blockMs: number,
  env: (running: Pick<RunningStarknet, "info" | "executors">) => Record<string, string>,
): Promise<BenchLedger> {
  const payers = Math.min(20, payments);
  const executors = 2;
  const node = await startNode({ blockMs, payers, executors });
  const { info } = node;
  const provider = new RpcProvider({ nodeUrl: info.rpcUrl });
  const schemes = info.payers.map(
    (p) =>
      new ExactStarknetClientScheme(
        new Account({ provider, address: p.address, signer: p.privateKey, cairoVersion: "1" }),
      ),
  );
  return {
    title: "Starknet",
    network: STARKNET_MAINNET,
    setup: `local Starknet (a block every ${blockMs} ms), on a thread of its own; USDC, maxTimeoutSeconds 600; ${payers} payers, ${payments / payers} payments each (SNIP-9 outside executions, random nonces), every one signed before the run; ${executors} executor accounts for the service`,
    // StarknetLedger.produceBlock takes the whole mempool into each block.
    perBlock: undefined,
    env: env(node),
    payTo: info.payTo,
    asset: info.assets.USDC,
    amount: "10000",
    extra: {},
    // Settles here run at a few a second: 1,000 take minutes, and an outside
    // execution signed before the run lapses at now + maxTimeoutSeconds.
    maxTimeoutSeconds: 600,
    signedBeforeRun: true,
    sign: (i, requirements) => schemes[i % schemes.length]!.createPaymentPayload(2, requirements),
    balance: () => node.balance(info.payTo),
    stop: () => node.stop(),
  };
}

/** The node's thread: its info and executors, balances, stop. */
async function startNode(opts: StarknetDevnetOptions) {
  const worker = siblingWorker(import.meta.url, "benchLedger", { workerData: opts });
  const ready = await firstMessage<FromLedger>(worker);
  if (ready.kind !== "ready") throw new Error("the Starknet bench's node did not start");
  const balances = answersById<string>(worker);
  let stopped: (() => void) | undefined;
  worker.on("message", (m: FromLedger) => {
    if (m.kind === "balance") balances.settle(m.id, { value: m.value });
    else if (m.kind === "stopped") stopped?.();
  });
  return {
    info: ready.info,
    executors: ready.executors,
    balance: (account: string) =>
      balances.ask((id) => worker.postMessage({ kind: "balance", id, account } satisfies ToLedger)),
    async stop() {
      await new Promise<void>((resolve) => {
        stopped = resolve;
        worker.postMessage({ kind: "stop" } satisfies ToLedger);
      });
      await worker.terminate();
    },
  };
}
