/**
 * The XRP Ledger side of the settle benchmark (bench/families.ts): the local
 * ledger with a payer per payment (a Payment's Sequence is read from the
 * ledger when it is signed, so a payer signs its next payment only once its
 * last is included), RLUSD, each ledger's close time for the delay to each
 * answer, and the project's own client scheme. Loaded only by the benchmarks.
 */
import { Client, Wallet } from "xrpl";
import { ExactXrplClientScheme } from "../../src/chains/xrpl/clients/exactClient.js";
import type { BenchLedger } from "../family.js";
import { XRPL_MAINNET, startXrplLedger, type RunningXrpl } from "./index.js";

export async function xrplBench(
  payers: number,
  blockMs: number,
  env: (running: RunningXrpl) => Record<string, string>,
): Promise<BenchLedger> {
  const running = await startXrplLedger({ closeMs: blockMs, payers });
  const { info } = running;
  // Each ledger's close, on this process's clock, for the delay to each answer.
  const closedAt = new Map<number, number>();
  running.ledger.onClose((l) => closedAt.set(l.index, performance.now()));
  // One connection for all the signing: the scheme opens one per payment otherwise.
  const client = new Client(info.wsUrl);
  await client.connect();
  const issuer = info.issuers.RLUSD;
  const schemes = info.payerSeeds.map(
    (seed) => new ExactXrplClientScheme(Wallet.fromSeed(seed), { client }),
  );
  return {
    title: "XRP Ledger",
    network: XRPL_MAINNET,
    setup: `local XRP Ledger (a ledger closes every ${blockMs} ms); RLUSD; ${payers} payers, one payment each (each pays its own fee; the service holds no keys)`,
    // XrplLedger.submit applies to the open ledger at once; close() validates all of it.
    perBlock: undefined,
    env: env(running),
    payTo: info.payTo,
    asset: info.assets.RLUSD,
    amount: "0.01",
    extra: { issuer },
    sign: (i, requirements) => schemes[i % schemes.length]!.createPaymentPayload(2, requirements),
    balance: () => running.ledger.issuedBalance(info.payTo, issuer, info.assets.RLUSD),
    includedAt: (hash) => {
      const index = running.ledger.transaction(hash)?.ledgerIndex;
      return index === undefined ? undefined : closedAt.get(index);
    },
    async stop() {
      await client.disconnect();
      await running.stop();
    },
  };
}
