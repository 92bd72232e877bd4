/**
 * Settlements waiting for confirmation share one status poll: each tick asks
 * the ledger for all their signatures in one `getSignatureStatuses` call,
 * instead of one call per settlement. Under load that was most of a
 * settle's RPC calls, on a ledger shared with every other settle. Each
 * settlement still gets its own outcome, journaled once.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentRequirements } from "@x402/core/types";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { startSolanaLedger, type RunningSolana } from "../../../devnet/svm/index.js";
import type { SolanaLedger } from "../../../devnet/svm/ledger.js";
import type { SvmChainAdapter } from "../../../src/chains/svm/index.js";
import { noopJournal } from "../../../src/chains/ports.js";
import { SOLANA_NETWORK as NETWORK, testSvmFamily } from "./family.js";
import { startRpcProxy, type RpcProxy } from "../../support/rpcProxy.js";
import { solanaPaymentRequest } from "./payments.js";

// Enough that one call per settlement (at least this many) stands clear of
// one call a tick for all of them (a few, over a 400 ms slot at 50 ms ticks).
const SETTLES = 32;

describe("Solana confirmations", () => {
  let devnet: RunningSolana & { ledger: SolanaLedger };
  let proxy: RpcProxy;
  let family: SvmChainAdapter;
  let engine: x402Facilitator;
  let feePayer: string;
  const finished: { reference: string; status: string }[] = [];

  before(async () => {
    // Slots of 400 ms, as the devnet runs: a settlement waits a few ticks.
    devnet = await startSolanaLedger({ slotMs: 400 });
    // Keeps the ledger's answer to every status call: one per call.
    proxy = await startRpcProxy(devnet.info.rpcUrl, "getSignatureStatuses");
    family = await testSvmFamily({
      rpcUrl: proxy.url,
      secretKeys: devnet.info.facilitatorSecretKeys,
      settings: { maxComputeUnits: 400_000, minFeePayerLamports: 10_000_000n },
      context: {
        journal: {
          ...noopJournal,
          finished: async (reference, status) => void finished.push({ reference, status }),
        },
        settleTimeoutMs: 20_000,
      },
    });
    engine = new x402Facilitator();
    family.register(engine);
    feePayer = (
      await createKeyPairSignerFromBytes(
        getBase58Encoder().encode(devnet.info.facilitatorSecretKeys[0]!),
      )
    ).address;
  });
  after(async () => {
    await family.close();
    await proxy.close();
    await devnet.stop();
  });

  const requirements = (amount: string): PaymentRequirements => ({
    scheme: "exact",
    network: NETWORK,
    asset: devnet.info.assets.USDC,
    amount,
    payTo: devnet.info.payTo,
    maxTimeoutSeconds: 60,
    extra: { feePayer },
  });

  test(`${SETTLES} settlements at once: each confirmed and journaled once, their statuses asked together`, async () => {
    const payments = await Promise.all(
      Array.from({ length: SETTLES }, (_, i) =>
        solanaPaymentRequest(devnet.info, i % devnet.info.payerSecretKeys.length, {
          ...requirements(String(1_000 + i)),
        }),
      ),
    );
    const before = proxy.state.answers.length;
    const settled = await Promise.all(
      payments.map((p) => engine.settle(p.paymentPayload, p.paymentRequirements)),
    );
    const calls = proxy.state.answers.length - before;

    for (const s of settled) assert.equal(s.success, true, JSON.stringify(s));
    const signatures = settled.map((s) => s.transaction);
    assert.equal(new Set(signatures).size, SETTLES);
    assert.deepEqual(
      finished
        .filter((f) => signatures.includes(f.reference))
        .map((f) => f.status)
        .sort(),
      Array<string>(SETTLES).fill("success"),
      "each settlement's outcome journaled once",
    );
    // One call a tick for all of them: as many calls as ticks waited, not
    // one per settlement per tick. Every call carried several signatures.
    const asked = proxy.state.answers
      .slice(before)
      .map((a) => (JSON.parse(a) as { result: { value: unknown[] } }).result.value.length);
    assert.ok(calls > 0);
    assert.ok(
      calls < SETTLES,
      `${calls} status calls for ${SETTLES} settlements (${asked.join(", ")} signatures each)`,
    );
    assert.ok(Math.max(...asked) > 1, `signatures per call: ${asked.join(", ")}`);
  });
});
