/**
 * The NEAR side of the settle benchmark (bench/families.ts): the local chain
 * with a payer per payment (a delegate action's nonce is read from the chain
 * when it is signed, so a payer signs its next payment only once its last is
 * included), two relayers for the service, and the project's own client
 * scheme. Loaded only by the benchmarks.
 */
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { JsonRpcProvider } from "@near-js/providers";
import { ExactNearClientScheme } from "../../src/chains/near/clients/exactClient.js";
import type { BenchLedger } from "../family.js";
import { NEAR_MAINNET, startNearLedger, type RunningNear } from "./index.js";

const AMOUNT = "10000";

export async function nearBench(
  payers: number,
  blockMs: number,
  env: (running: RunningNear) => Record<string, string>,
): Promise<BenchLedger> {
  const relayers = 2;
  const running = await startNearLedger({ blockMs, payers, relayers });
  const { info } = running;
  const provider = new JsonRpcProvider({ url: info.rpcUrl });
  const usdc = running.ledger.token(info.assets.USDC)!;
  const schemes = info.payers.map(
    (p) =>
      new ExactNearClientScheme(p.accountId, KeyPair.fromString(p.secretKey as KeyPairString), {
        provider,
      }),
  );
  return {
    title: "NEAR",
    network: NEAR_MAINNET,
    setup: `local NEAR ledger (a block every ${blockMs} ms, USDC's NEP-141 contract); ${payers} payers, one payment each; ${relayers} relayer accounts for the service`,
    // NearLedger.produce takes the whole pool into each block.
    perBlock: undefined,
    env: env(running),
    payTo: info.payTo,
    asset: info.assets.USDC,
    amount: AMOUNT,
    extra: {},
    sign: (i, requirements) => schemes[i % schemes.length]!.createPaymentPayload(2, requirements),
    balance: () => usdc.balanceOf(info.payTo).toString(),
    stop: () => running.stop(),
  };
}
