/**
 * NEAR `exact` through this service: an `@x402/express` resource server
 * with `HTTPFacilitatorClient` pointed at us, paid with this project's NEAR
 * client scheme (no official one is published) over `@near-js/providers`,
 * against the local NEAR chain. Token and NEAR balances are read from the
 * chain; records and quota from the database.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { actionCreators } from "@near-js/transactions";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentRequirements } from "@x402/core/types";
import { wrapFetchWithPayment } from "@x402/fetch";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { paymentRequest } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { TGAS, nearPayment, nearRequirements, payerKey } from "../chains/near/payments.js";
import { NEAR_MAINNET } from "../../devnet/near/index.js";
import { ExactNearClientScheme } from "../../src/chains/near/clients/exactClient.js";
import { ExactNearServerScheme } from "../../src/chains/near/clients/exactServer.js";
import { monthOf } from "../../src/features/plans/plans.js";
import { until } from "../support/processes.js";

describe("NEAR end to end through the service", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let origin: string;

  before(async () => {
    stack = await startStack({ families: { near: {} }, env: { METER_SETTLEMENTS: "true" } });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack)).register(
      NEAR_MAINNET,
      new ExactNearServerScheme(),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /report": {
            accepts: {
              scheme: "exact",
              price: "$0.25",
              network: NEAR_MAINNET,
              payTo: stack.families.near!.info.payTo,
            },
            description: "Paid in NEAR USDC",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/report", (_req, res) => void res.json({ paid: "near" }));
    server = await listenOnLoopback(app);
    origin = server.origin;
  });
  after(async () => {
    await server?.close();
    await stack.stop();
  });

  const near = () => stack.families.near!;
  const usdcOf = (account: string) =>
    near().ledger.token(near().info.assets.USDC)!.balanceOf(account);
  const rowOf = (transaction: string) =>
    stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", transaction)
      .executeTakeFirstOrThrow();
  const usedQuota = async () =>
    (
      await stack.service.db
        .selectFrom("quota_usage")
        .select(["used"])
        .where("account_id", "=", stack.accountId)
        .where("month", "=", monthOf(new Date()))
        .executeTakeFirst()
    )?.used ?? 0;
  const requirements = (fields: Partial<PaymentRequirements> = {}) =>
    nearRequirements(near(), fields);
  const verify = async (body: unknown) =>
    (await (await post(stack.url, "/verify", body, stack.apiKey)).json()) as {
      isValid: boolean;
      invalidReason?: string;
      invalidMessage?: string;
      payer?: string;
    };

  test("GET /supported lists exact on near:mainnet and the relayer accounts under signers.near", async () => {
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      kinds: { network: string; scheme: string; extra?: unknown }[];
      signers: Record<string, string[]>;
    };
    assert.deepEqual(
      supported.kinds.filter((k) => k.network === NEAR_MAINNET),
      [{ x402Version: 2, scheme: "exact", network: NEAR_MAINNET }],
    );
    assert.deepEqual(
      supported.signers["near"]?.sort(),
      near()
        .info.relayers.map((r) => r.accountId)
        .sort(),
    );
  });

  test("402 → pay → 200: exactly the price moves, the relayer pays the gas, recorded and counted", async () => {
    const payer = payerKey(near(), 0);
    const before = {
      payer: usdcOf(payer.accountId),
      payTo: usdcOf(near().info.payTo),
      payerNear: near().ledger.balance(payer.accountId),
      relayers: near().info.relayers.reduce((s, r) => s + near().ledger.balance(r.accountId), 0n),
    };
    const used = await usedQuota();
    const client = new x402Client().register(
      "near:*",
      new ExactNearClientScheme(payer.accountId, payer.key, { rpcUrl: near().info.rpcUrl }),
    );
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/report`);
    assert.equal(
      res.status,
      200,
      res.headers.get("payment-required") ?? (await res.clone().text()),
    );
    assert.deepEqual(await res.json(), { paid: "near" });
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(near().ledger.stage(receipt.transaction), "FINAL");
    assert.equal(usdcOf(payer.accountId), before.payer - 250_000n);
    assert.equal(usdcOf(near().info.payTo), before.payTo + 250_000n);
    assert.equal(near().ledger.balance(payer.accountId), before.payerNear, "the payer paid no gas");
    const relayersAfter = near().info.relayers.reduce(
      (s, r) => s + near().ledger.balance(r.accountId),
      0n,
    );
    assert.ok(relayersAfter < before.relayers, "a relayer paid the gas");
    const row = await rowOf(receipt.transaction);
    assert.deepEqual(
      [row.status, row.network, row.scheme, row.amount, row.payer, row.billed],
      ["succeeded", NEAR_MAINNET, "exact", "250000", payer.accountId, true],
    );
    assert.equal(await usedQuota(), used + 1);
  });

  test("each verify negative answers its own reason and changes nothing on the chain", async () => {
    const payer = payerKey(near(), 1);
    const base = requirements();
    const before = usdcOf(payer.accountId);
    const nonce = near().ledger.accessKey(
      payer.accountId,
      payer.key.getPublicKey().toString(),
    )!.nonce;
    // A function-call key of the payer's, and an account the token does not know.
    const limited = KeyPair.fromRandom("ed25519");
    near().ledger.addKey(payer.accountId, limited.getPublicKey().toString(), {
      FunctionCall: { allowance: null, receiver_id: near().info.assets.USDC, method_names: [] },
    });
    // A new key's nonce starts at its block height × 10⁶: usable once that block is final.
    for (let i = 0; i < 3; i++) near().ledger.produce();
    const relayer = near().info.relayers[0]!;
    const relayerKey = KeyPair.fromString(relayer.secretKey as KeyPairString);
    near().ledger.token(near().info.assets.USDC)!.mint(relayer.accountId, 1_000_000n);
    const unregistered = "unregistered.devnet.near";
    near().ledger.createAccount(unregistered, 10n ** 24n);
    const stranger = KeyPair.fromRandom("ed25519");

    const cases: [string, PaymentRequirements, () => Promise<unknown>][] = [
      [
        "invalid_exact_near_payload",
        base,
        async () => paymentRequest(base, { signedDelegateAction: "AAAA" }),
      ],
      [
        "invalid_exact_near_key_type",
        base,
        () => nearPayment(near(), 1, base, { forgedBy: stranger }),
      ],
      [
        "invalid_exact_near_signature",
        base,
        () => nearPayment(near(), 1, base, { forgedBy: KeyPair.fromRandom("secp256k1") }),
      ],
      [
        "invalid_exact_near_actions",
        base,
        () =>
          nearPayment(near(), 1, base, {
            extraActions: [actionCreators.functionCall("ft_transfer", {}, 5n * TGAS, 1n)],
          }),
      ],
      [
        "invalid_exact_near_method",
        base,
        () => nearPayment(near(), 1, base, { method: "ft_transfer_call" }),
      ],
      [
        "invalid_exact_near_asset",
        base,
        () => nearPayment(near(), 1, base, { receiverId: "other-token.near" }),
      ],
      [
        "invalid_exact_near_recipient",
        base,
        () =>
          nearPayment(near(), 1, base, {
            args: { receiver_id: "thief.near", amount: base.amount },
          }),
      ],
      [
        "invalid_exact_near_amount",
        base,
        () => nearPayment(near(), 1, base, { args: { receiver_id: base.payTo, amount: 10000 } }),
      ],
      ["invalid_exact_near_deposit", base, () => nearPayment(near(), 1, base, { deposit: 0n })],
      ["invalid_exact_near_gas", base, () => nearPayment(near(), 1, base, { gas: 250n * TGAS })],
      [
        "invalid_exact_near_relayer_is_payer",
        base,
        () => nearPayment(near(), 1, base, { senderId: relayer.accountId, key: relayerKey }),
      ],
      ["invalid_exact_near_expired", base, () => nearPayment(near(), 1, base, { ahead: 0n })],
      [
        "invalid_exact_near_max_block_height",
        base,
        () => nearPayment(near(), 1, base, { ahead: 500n }),
      ],
      ["invalid_exact_near_nonce", base, () => nearPayment(near(), 1, base, { nonceOffset: -1n })],
      ["invalid_exact_near_access_key", base, () => nearPayment(near(), 1, base, { key: limited })],
      [
        "invalid_exact_near_account_not_found",
        base,
        () => nearPayment(near(), 1, base, { senderId: "ghost.devnet.near", key: stranger }),
      ],
      [
        "invalid_exact_near_recipient_not_registered",
        requirements({ payTo: unregistered }),
        () => nearPayment(near(), 1, requirements({ payTo: unregistered })),
      ],
      [
        "insufficient_funds",
        requirements({ amount: (before * 2n).toString() }),
        () => nearPayment(near(), 1, requirements({ amount: (before * 2n).toString() })),
      ],
    ];
    for (const [reason, , make] of cases) {
      const out = await verify(await make());
      assert.equal(out.isValid, false, reason);
      assert.equal(out.invalidReason, reason, `${reason}: ${out.invalidMessage}`);
    }
    // Settling one of them is a recorded failure with the same reason, and nothing is sent.
    const settle = (await (
      await post(
        stack.url,
        "/settle",
        await nearPayment(near(), 1, base, { deposit: 2n }),
        stack.apiKey,
      )
    ).json()) as { success: boolean; errorReason?: string; transaction: string };
    assert.deepEqual(
      [settle.success, settle.errorReason, settle.transaction],
      [false, "invalid_exact_near_deposit", ""],
    );
    assert.equal(usdcOf(payer.accountId), before);
    assert.equal(
      near().ledger.accessKey(payer.accountId, payer.key.getPublicKey().toString())!.nonce,
      nonce,
    );
    assert.deepEqual(await verify(await nearPayment(near(), 1, base)), {
      isValid: true,
      payer: payer.accountId,
    });
  });

  test("a secp256k1 payer key pays too", async () => {
    // Payer 1 holds a secp256k1 key in the devnet.
    const payer = payerKey(near(), 3);
    assert.match(payer.key.getPublicKey().toString(), /^secp256k1:/);
    const req = requirements({ amount: "4242" });
    const before = usdcOf(payer.accountId);
    const out = (await (
      await post(stack.url, "/settle", await nearPayment(near(), 3, req), stack.apiKey)
    ).json()) as { success: boolean; transaction: string };
    assert.equal(out.success, true, JSON.stringify(out));
    assert.equal(usdcOf(payer.accountId), before - 4242n);
  });

  test("a transfer the token refuses once relayed: success false with the chain's reason, recorded failed, nothing moved", async () => {
    const payer = payerKey(near(), 4);
    const req = requirements({ amount: "5000" });
    const body = await nearPayment(near(), 4, req);
    const token = near().ledger.token(near().info.assets.USDC)!;
    const all = token.balanceOf(payer.accountId);
    const payTo = usdcOf(near().info.payTo);
    near().ledger.withhold();
    let settled: Promise<{ success: boolean; errorReason?: string; transaction: string }>;
    try {
      settled = post(stack.url, "/settle", body, stack.apiKey).then((r) => r.json() as never);
      await until("the relayed transaction waits in the pool", async () =>
        near().ledger.waiting > 0 ? true : undefined,
      );
      // The payer spends its balance elsewhere before the relayed transfer runs.
      token.mint(payer.accountId, -all);
    } finally {
      near().ledger.release();
    }
    const out = await settled;
    assert.deepEqual([out.success, out.errorReason], [false, "insufficient_funds"]);
    assert.equal(usdcOf(near().info.payTo), payTo);
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["id", "status", "error_reason"])
      .where("payer", "=", payer.accountId)
      .where("amount", "=", "5000")
      .execute();
    assert.deepEqual(
      rows.map((r) => [r.status, r.error_reason]),
      [["failed", "insufficient_funds"]],
    );
    // The relayed transaction is final on the chain, its transfer receipt failed.
    const sent = await stack.service.db
      .selectFrom("settlement_transactions")
      .select(["reference"])
      .where("settlement_id", "=", rows[0]!.id)
      .executeTakeFirstOrThrow();
    assert.equal(near().ledger.stage(sent.reference), "FINAL");
    assert.match(
      JSON.stringify(near().ledger.transaction(sent.reference)!.receiptsOutcome),
      /enough balance/,
    );
    token.mint(payer.accountId, all);
  });
});
