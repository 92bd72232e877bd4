/**
 * The Starknet side of the settle benchmark (bench/families.ts): the local
 * Starknet with a few payers (an outside execution carries a random nonce of
 * the payer's choosing, so a payer signs many payments), two executors for
 * the service, and the project's own client scheme. Loaded only by the
 * benchmarks.
 */
import { Account, RpcProvider } from "starknet";
import { ExactStarknetClientScheme } from "../../src/chains/starknet/clients/exactClient.js";
import { STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import type { BenchLedger } from "../family.js";
import { STARKNET_MAINNET, startStarknetLedger, type RunningStarknet } from "./index.js";

export async function starknetBench(
  payments: number,
  blockMs: number,
  env: (running: RunningStarknet) => Record<string, string>,
): Promise<BenchLedger> {
  const payers = Math.min(20, payments);
  const executors = 2;
  const running = await startStarknetLedger({ blockMs, payers, executors });
  const { info } = running;
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
    setup: `local Starknet (a block every ${blockMs} ms); USDC, maxTimeoutSeconds 600; ${payers} payers, ${payments / payers} payments each (SNIP-9 outside executions, random nonces), every one signed before the run; ${executors} executor accounts for the service`,
    // StarknetLedger.produceBlock takes the whole mempool into each block.
    perBlock: undefined,
    env: env(running),
    payTo: info.payTo,
    asset: info.assets.USDC,
    amount: "10000",
    extra: {},
    // Settles here run at a few a second: 1,000 take minutes, and an outside
    // execution signed before the run lapses at now + maxTimeoutSeconds.
    maxTimeoutSeconds: 600,
    signedBeforeRun: true,
    sign: (i, requirements) => schemes[i % schemes.length]!.createPaymentPayload(2, requirements),
    balance: () => running.ledger.balanceOf(STARKNET_USDC, info.payTo).toString(),
    stop: () => running.stop(),
  };
}
