/**
 * The payTo's token account is read once, not once per payment: every
 * verification and settle to the same payTo asked the ledger again, beside
 * the simulation, which halved what a Solana verification could reach. A
 * payTo without one is asked again each time (it may be created any moment),
 * and so is one whose read failed.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { createKeyPairSignerFromBytes, generateKeyPairSigner, getBase58Encoder } from "@solana/kit";
import { startSolanaLedger, type RunningSolana } from "../../../devnet/svm/index.js";
import type { SolanaLedger } from "../../../devnet/svm/ledger.js";
import {
  SVM_PAY_TO_WITHOUT_TOKEN_ACCOUNT,
  type SvmChainAdapter,
} from "../../../src/chains/svm/index.js";
import { SOLANA_NETWORK as NETWORK, testSvmFamily } from "./family.js";
import { startRpcProxy, type RpcProxy } from "../../support/rpcProxy.js";
import { solanaPaymentRequest } from "./payments.js";

describe("Solana payTo token accounts", () => {
  let devnet: RunningSolana & { ledger: SolanaLedger };
  let proxy: RpcProxy;
  let family: SvmChainAdapter;
  let feePayer: string;
  /** A real signed payment; `prepare` reads only the requirements beside it. */
  let payload: PaymentPayload;

  before(async () => {
    devnet = await startSolanaLedger({ slotMs: 100 });
    // Keeps the ledger's answer to every getAccountInfo call: one per read.
    proxy = await startRpcProxy(devnet.info.rpcUrl, "getAccountInfo");
    family = await testSvmFamily({
      rpcUrl: proxy.url,
      secretKeys: devnet.info.facilitatorSecretKeys,
    });
    feePayer = (
      await createKeyPairSignerFromBytes(
        getBase58Encoder().encode(devnet.info.facilitatorSecretKeys[0]!),
      )
    ).address;
    payload = (await solanaPaymentRequest(devnet.info, 0, requirements(devnet.info.payTo)))
      .paymentPayload;
  });
  after(async () => {
    await family.close();
    await proxy.close();
    await devnet.stop();
  });

  const requirements = (payTo: string): PaymentRequirements => ({
    scheme: "exact",
    network: NETWORK,
    asset: devnet.info.assets.USDC,
    amount: "1000",
    payTo,
    maxTimeoutSeconds: 60,
    extra: { feePayer },
  });

  test("an existing token account is read once for concurrent and later payments alike", async () => {
    const req = requirements(devnet.info.payTo);
    const before = proxy.state.answers.length;
    const concurrent = await Promise.all(
      Array.from({ length: 8 }, () => family.prepare(payload, req)),
    );
    const later = [await family.prepare(payload, req), await family.prepare(payload, req)];
    assert.ok([...concurrent, ...later].every((p) => p.ok));
    assert.equal(proxy.state.answers.length - before, 1);
  });

  test("a payTo without one is refused with what to do, and asked again each time", async () => {
    const bare = (await generateKeyPairSigner()).address;
    const req = requirements(bare);
    const before = proxy.state.answers.length;
    for (let i = 0; i < 2; i++) {
      const p = await family.prepare(payload, req);
      assert.equal(p.ok, false);
      assert.equal(p.ok ? undefined : p.reason, SVM_PAY_TO_WITHOUT_TOKEN_ACCOUNT);
    }
    assert.equal(proxy.state.answers.length - before, 2);
  });

  test("a read that failed is not remembered: the next payment asks again", async () => {
    const other = (await generateKeyPairSigner()).address;
    const req = requirements(other);
    proxy.state.down = true;
    try {
      await assert.rejects(family.prepare(payload, req));
    } finally {
      proxy.state.down = false;
    }
    const before = proxy.state.answers.length;
    const p = await family.prepare(payload, req);
    assert.equal(p.ok ? undefined : p.reason, SVM_PAY_TO_WITHOUT_TOKEN_ACCOUNT);
    assert.equal(proxy.state.answers.length - before, 1);
  });
});
