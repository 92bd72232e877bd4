/**
 * Solana `exact` through this service with the official packages unmodified:
 * an `@x402/express` resource server whose route accepts USDC on Solana,
 * `HTTPFacilitatorClient` pointed at this service, and an `@x402/fetch`
 * client with the `@x402/svm` client scheme and a devnet payer key (given
 * the devnet's RPC URL, as the README shows: the registration helper would
 * reach the public node). The ledger is LiteSVM running the real SPL Token
 * program; balances, the record and a missing token account are checked
 * there (duplicates, replays and outages: test/families/).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentRequirements } from "@x402/core/types";
import { ExactSvmScheme as ExactSvmServerScheme } from "@x402/svm/exact/server";
import { ExactSvmScheme as ExactSvmClientScheme } from "@x402/svm/exact/client";
import { wrapFetchWithPayment } from "@x402/fetch";
import { address, createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { getTokenDecoder } from "@solana-program/token";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { post } from "../support/http.js";
import { SOLANA_MAINNET, associatedTokenAccount } from "../../devnet/svm/index.js";

describe("Solana USDC end to end through the service", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let resourceUrl: string;

  before(async () => {
    stack = await startStack({ families: { solana: {} } });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack)).register(
      SOLANA_MAINNET,
      new ExactSvmServerScheme(),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /tides": {
            accepts: {
              scheme: "exact",
              price: "$0.002",
              network: SOLANA_MAINNET,
              payTo: stack.families.solana!.info.payTo,
            },
            description: "Tide tables",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/tides", (_req, res) => {
      res.json({ high: "06:12" });
    });
    server = await listenOnLoopback(app);
    resourceUrl = `${server.origin}/tides`;
  });
  after(async () => {
    await server?.close();
    await stack.stop();
  });

  const signer = (i: number) =>
    createKeyPairSignerFromBytes(
      getBase58Encoder().encode(stack.families.solana!.info.payerSecretKeys[i]!),
    );
  const usdcOf = async (owner: string) => {
    const acc = stack.families.solana!.ledger.account(await associatedTokenAccount(address(owner)));
    return acc.exists ? getTokenDecoder().decode(acc.data).amount : -1n;
  };

  test("402 → pay → 200: exactly the price moves and the settlement is recorded", async () => {
    const payer = await signer(0);
    const payTo = stack.families.solana!.info.payTo;
    const [payerBefore, payToBefore] = await Promise.all([usdcOf(payer.address), usdcOf(payTo)]);
    const client = new x402Client().register(
      "solana:*",
      new ExactSvmClientScheme(payer, { rpcUrl: stack.families.solana!.info.rpcUrl }),
    );
    const res = await wrapFetchWithPayment(fetch, client)(resourceUrl);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { high: "06:12" });
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(await usdcOf(payer.address), payerBefore - 2000n);
    assert.equal(await usdcOf(payTo), payToBefore + 2000n);
    const row = await stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", receipt.transaction)
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      [row.status, row.network, row.scheme, row.payer, row.amount, row.pay_to, row.asset],
      // Base58 as written: lower-cased it would name another account, or none.
      [
        "succeeded",
        SOLANA_MAINNET,
        "exact",
        payer.address,
        "2000",
        payTo,
        stack.families.solana!.info.assets.USDC,
      ],
    );
    const journal = await stack.service.db
      .selectFrom("settlement_transactions")
      .select(["reference", "status"])
      .where("settlement_id", "=", row.id)
      .execute();
    assert.deepEqual(journal, [{ reference: receipt.transaction, status: "success" }]);
  });

  test("GET /supported offers a fee payer for Solana, listed under signers.solana", async () => {
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      kinds: { network: string; extra?: Record<string, unknown> }[];
      signers: Record<string, string[]>;
    };
    const kind = supported.kinds.find((k) => k.network === SOLANA_MAINNET)!;
    assert.ok(supported.signers["solana"]?.includes(String(kind.extra!["feePayer"])));
  });

  test("a payTo without a token account: a clear refusal naming what to do, nothing recorded as paid", async () => {
    const stranger = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    const strangerRequirements = {
      scheme: "exact",
      network: SOLANA_MAINNET,
      asset: stack.families.solana!.info.assets.USDC,
      amount: "1",
      payTo: stranger,
      maxTimeoutSeconds: 60,
      extra: {},
    };
    const body = {
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        accepted: strangerRequirements,
        payload: { transaction: "AQ==" },
      },
      paymentRequirements: strangerRequirements,
    };
    const res = await post(stack.url, "/verify", body, stack.apiKey);
    const json = (await res.json()) as Record<string, unknown>;
    // A payload that is not a transaction is a 400 naming the field…
    assert.equal(res.status, 400, JSON.stringify(json));
    assert.match(String(json["message"]), /paymentPayload\.payload\.transaction/);
    // …and a real one to an account-less payTo is refused with the reason.
    const payer = await signer(2);
    const requirements = {
      ...body.paymentRequirements,
      payTo: stack.families.solana!.info.payTo,
    } as PaymentRequirements;
    const kinds = (await (await fetch(`${stack.url}/supported`)).json()) as {
      kinds: { network: string; extra?: Record<string, unknown> }[];
    };
    requirements.extra = {
      feePayer: kinds.kinds.find((k) => k.network === SOLANA_MAINNET)!.extra!["feePayer"],
    };
    const partial = await new ExactSvmClientScheme(payer, {
      rpcUrl: stack.families.solana!.info.rpcUrl,
    }).createPaymentPayload(2, requirements);
    const verify = (await (
      await post(
        stack.url,
        "/verify",
        {
          x402Version: 2,
          paymentPayload: { x402Version: 2, accepted: requirements, payload: partial.payload },
          paymentRequirements: { ...requirements, payTo: stranger },
        },
        stack.apiKey,
      )
    ).json()) as { isValid: boolean; invalidReason: string; invalidMessage: string };
    assert.equal(verify.isValid, false);
    assert.equal(verify.invalidReason, "invalid_exact_svm_pay_to_token_account_missing");
    assert.match(verify.invalidMessage, /create its associated token account/);
  });
});
