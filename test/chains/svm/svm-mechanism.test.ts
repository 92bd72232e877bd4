/**
 * The Solana family against the local ledger (LiteSVM, real SPL Token
 * program), with the official `@x402/svm` client building the payment: verify
 * and settle move exactly the price, a replayed transaction is refused, the
 * fee payer never pays from its own accounts, a payTo without a token account
 * gets a reason that says what to do, and reconcile reads the chain.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactSvmScheme } from "@x402/svm/exact/client";
import {
  address,
  createKeyPairSignerFromBytes,
  getBase58Decoder,
  getBase58Encoder,
} from "@solana/kit";
import {
  startSolanaLedger,
  associatedTokenAccount,
  type RunningSolana,
} from "../../../devnet/svm/index.js";
import type { SolanaLedger } from "../../../devnet/svm/ledger.js";
import { createSvm, type SvmChainAdapter } from "../../../src/chains/svm/index.js";
import { noopJournal, type JournalEntry } from "../../../src/chains/ports.js";
import { createLogger } from "../../../src/lib/logger.js";
import { getTokenDecoder } from "@solana-program/token";

const NETWORK = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";

describe("Solana exact against the local ledger", () => {
  let devnet: RunningSolana & { ledger: SolanaLedger };
  let family: SvmChainAdapter;
  let engine: x402Facilitator;
  const journaled: JournalEntry[] = [];

  before(async () => {
    devnet = await startSolanaLedger({ slotMs: 100 });
    family = await createSvm(
      {
        networks: [{ id: NETWORK, rpcUrl: devnet.info.rpcUrl }],
        secretKeys: devnet.info.facilitatorSecretKeys,
      },
      {
        commitment: "confirmed",
        maxComputeUnits: 400_000,
        maxPriorityFeeMicroLamports: 50_000,
        minFeePayerLamports: 10_000_000n,
      },
      {
        log: createLogger("silent"),
        journal: { ...noopJournal, sent: async (e) => void journaled.push(e) },
        leases: { port: { sync: async () => [], releaseAll: async () => {} }, holder: "test" },
        settleTimeoutMs: 10_000,
        onSignerHealth: () => {},
        pollingIntervalMs: 50,
      },
    );
    engine = new x402Facilitator();
    family.register(engine);
    await family.start();
  });
  after(async () => {
    await family.close();
    await devnet.stop();
  });

  const usdcOf = (owner: string) => {
    return associatedTokenAccount(address(owner)).then((ata) => {
      const acc = devnet.ledger.account(ata);
      return acc.exists ? getTokenDecoder().decode(acc.data).amount : -1n;
    });
  };
  const requirements = (payTo = devnet.info.payTo, amount = "2500"): PaymentRequirements => {
    const supported = engine.getSupported();
    const kind = supported.kinds.find((k) => k.network === NETWORK)!;
    return {
      scheme: "exact",
      network: NETWORK,
      asset: devnet.info.assets.USDC,
      amount,
      payTo,
      maxTimeoutSeconds: 60,
      extra: { feePayer: kind.extra!["feePayer"] },
    } as PaymentRequirements;
  };
  const pay = async (payerIndex: number, req: PaymentRequirements): Promise<PaymentPayload> => {
    const signer = await createKeyPairSignerFromBytes(
      getBase58Encoder().encode(devnet.info.payerSecretKeys[payerIndex]!),
    );
    const client = new ExactSvmScheme(signer, { rpcUrl: devnet.info.rpcUrl });
    const partial = await client.createPaymentPayload(2, req);
    return { x402Version: 2, accepted: req, payload: partial.payload } as PaymentPayload;
  };

  test("the official client's payment verifies and settles; exactly the price moves", async () => {
    const req = requirements();
    const payload = await pay(0, req);
    const payer = family.payerOf(payload)!;
    const [payerBefore, payToBefore] = await Promise.all([usdcOf(payer), usdcOf(req.payTo)]);
    const verified = await engine.verify(payload, req);
    assert.equal(verified.isValid, true, JSON.stringify(verified));
    const settled = await engine.settle(payload, req);
    assert.equal(settled.success, true, JSON.stringify(settled));
    assert.equal(await usdcOf(payer), payerBefore - 2500n);
    assert.equal(await usdcOf(req.payTo), payToBefore + 2500n);
    assert.ok(
      journaled.some((j) => j.reference === settled.transaction),
      "journaled before it left",
    );
    // The same signed transaction again moves nothing.
    const again = await engine.settle(payload, req);
    assert.equal(again.success, false);
    assert.equal(await usdcOf(req.payTo), payToBefore + 2500n);
    // The chain says it landed.
    const outcome = await family.reconcile({
      network: NETWORK,
      request: { x402Version: 2, paymentPayload: payload, paymentRequirements: req },
      transactions: [{ network: NETWORK, reference: settled.transaction, detail: {} }],
    });
    assert.deepEqual(outcome, { status: "succeeded", transaction: settled.transaction });
  });

  test("the reorg watch's joint read: a landed signature is confirmed, an unknown one is not", async () => {
    const req = requirements();
    const settled = await engine.settle(await pay(2, req), req);
    assert.equal(settled.success, true, JSON.stringify(settled));
    // A well-formed signature the ledger never saw.
    const unknown = getBase58Decoder().decode(new Uint8Array(64).fill(7));
    const landed = await family.stillLanded(NETWORK, [unknown, settled.transaction]);
    assert.deepEqual([...landed], [settled.transaction]);
    assert.equal((await family.stillLanded("solana:elsewhere", [settled.transaction])).size, 0);
  });

  test("the authorization key is the same for every copy of one transaction", async () => {
    const req = requirements();
    const payload = await pay(1, req);
    const copy = JSON.parse(JSON.stringify(payload)) as PaymentPayload;
    assert.ok(family.authorizationKey(payload, req));
    assert.equal(family.authorizationKey(payload, req), family.authorizationKey(copy, req));
    const other = await pay(1, req);
    assert.notEqual(family.authorizationKey(payload, req), family.authorizationKey(other, req));
  });

  test("a payTo with no token account: a reason that says what to do, nothing moved", async () => {
    const stranger = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    const prepared = await family.prepare({} as PaymentPayload, requirements(stranger));
    assert.equal(prepared.ok, false);
    assert.ok(!prepared.ok && prepared.reason === "invalid_exact_svm_pay_to_token_account_missing");
    assert.ok(!prepared.ok && /create its associated token account/.test(prepared.message));
  });

  test("a payment in another mint is refused", async () => {
    const req = requirements();
    const payload = await pay(3, req);
    const other = await engine.verify(payload, {
      ...req,
      asset: "Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB",
    });
    assert.equal(other.isValid, false);
    assert.match(String(other.invalidReason), /mint/);
  });
});
