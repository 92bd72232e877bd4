/**
 * XRP Ledger `exact` through this service: an `@x402/express` resource
 * server with `HTTPFacilitatorClient` pointed at us, paid with this
 * project's XRPL client scheme (no official one is published) over the
 * `xrpl` package's WebSocket `Client`, against the local XRP Ledger.
 * Balances are read from the ledger; records and quota from the database.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentRequirements } from "@x402/core/types";
import { wrapFetchWithPayment } from "@x402/fetch";
import { Client, Wallet, type Payment } from "xrpl";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { paymentRequest } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { XRPL_MAINNET, devnetXrplWallet } from "../../devnet/xrpl/index.js";
import { RLUSD_CURRENCY, RLUSD_ISSUER } from "../../src/chains/xrpl/networks.js";
import { ExactXrplClientScheme, paymentFor } from "../../src/chains/xrpl/clients/exactClient.js";
import { ExactXrplServerScheme } from "../../src/chains/xrpl/clients/exactServer.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { monthOf } from "../../src/features/plans/plans.js";

describe("XRP Ledger end to end through the service", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let origin: string;
  let ws: Client;

  before(async () => {
    stack = await startStack({ families: { xrpl: {} } });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack)).register(
      XRPL_MAINNET,
      new ExactXrplServerScheme(),
    );
    const payTo = stack.families.xrpl!.info.payTo;
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /xrp": {
            accepts: {
              scheme: "exact",
              price: { amount: "1500", asset: "XRP" },
              network: XRPL_MAINNET,
              payTo,
            },
            description: "Paid in XRP",
            mimeType: "application/json",
          },
          "GET /rlusd": {
            accepts: { scheme: "exact", price: "$0.25", network: XRPL_MAINNET, payTo },
            description: "Paid in RLUSD",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/xrp", (_req, res) => void res.json({ paid: "xrp" }));
    app.get("/rlusd", (_req, res) => void res.json({ paid: "rlusd" }));
    server = await listenOnLoopback(app);
    origin = server.origin;
    ws = new Client(stack.families.xrpl!.info.wsUrl);
    await ws.connect();
  });
  after(async () => {
    await ws?.disconnect();
    await server?.close();
    await stack.stop();
  });

  const payer = (i: number) => Wallet.fromSeed(stack.families.xrpl!.info.payerSeeds[i]!);
  const ledger = () => stack.families.xrpl!.ledger;
  const rlusdOf = (a: string) => ledger().issuedBalance(a, RLUSD_ISSUER, RLUSD_CURRENCY);
  const rowOf = (transaction: string) =>
    stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", transaction)
      .executeTakeFirstOrThrow();
  const usedQuota = async (accountId: string) =>
    (
      await stack.service.db
        .selectFrom("quota_usage")
        .select(["used", "reserved"])
        .where("account_id", "=", accountId)
        .where("month", "=", monthOf(new Date()))
        .executeTakeFirst()
    )?.used ?? 0;

  const requirements = (fields: Partial<PaymentRequirements> = {}): PaymentRequirements => ({
    scheme: "exact",
    network: XRPL_MAINNET,
    asset: "XRP",
    amount: "2000",
    payTo: stack.families.xrpl!.info.payTo,
    maxTimeoutSeconds: 60,
    extra: { areFeesSponsored: false },
    ...fields,
  });
  const body = (req: PaymentRequirements, signedTxBlob: string) =>
    paymentRequest(req, { signedTxBlob });
  /** A payment signed as the client scheme signs it, with fields changed before signing. */
  const sign = async (wallet: Wallet, req: PaymentRequirements, fields: Partial<Payment> = {}) => {
    const validated = await ws.getLedgerIndex();
    const tx = await ws.autofill({
      ...paymentFor(wallet.classicAddress, req),
      LastLedgerSequence: validated + 10,
      ...fields,
    } as Payment);
    return wallet.sign(tx).tx_blob;
  };
  const verify = async (req: PaymentRequirements, blob: string) =>
    (await (await post(stack.url, "/verify", body(req, blob), stack.apiKey)).json()) as {
      isValid: boolean;
      invalidReason?: string;
      invalidMessage?: string;
      payer?: string;
    };

  test("GET /supported lists exact on xrpl:0 with areFeesSponsored false and no signers of ours", async () => {
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      kinds: { network: string; scheme: string; extra?: Record<string, unknown> }[];
      signers: Record<string, string[]>;
    };
    const kind = supported.kinds.find((k) => k.network === XRPL_MAINNET);
    assert.deepEqual(kind, {
      x402Version: 2,
      scheme: "exact",
      network: XRPL_MAINNET,
      extra: { areFeesSponsored: false },
    });
  });

  test("402 → pay in XRP → 200: exactly the price moves, the payer pays its fee, recorded, no quota counted", async () => {
    const wallet = payer(0);
    const [before, payToBefore] = [
      ledger().xrpBalance(wallet.classicAddress),
      ledger().xrpBalance(stack.families.xrpl!.info.payTo),
    ];
    const usedBefore = await usedQuota(stack.accountId);
    // XRP is not a dollar: the payer caps it in drops.
    const client = new x402Client()
      .register(
        "xrpl:*",
        new ExactXrplClientScheme(wallet, { wsUrl: stack.families.xrpl!.info.wsUrl }),
      )
      .setSpendControls({
        allowedAssets: [{ network: XRPL_MAINNET, asset: "XRP", maxAmountPerPayment: "10000" }],
      });
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/xrp`);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(await res.json(), { paid: "xrp" });
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    const tx = ledger().transaction(receipt.transaction)!;
    assert.equal(tx.meta["TransactionResult"], "tesSUCCESS");
    assert.ok(tx.ledgerIndex !== undefined, "validated");
    const fee = BigInt(String(tx.tx["Fee"]));
    assert.equal(ledger().xrpBalance(wallet.classicAddress), before - 1500n - fee);
    assert.equal(ledger().xrpBalance(stack.families.xrpl!.info.payTo), payToBefore + 1500n);
    const row = await rowOf(receipt.transaction);
    assert.deepEqual(
      [row.status, row.network, row.scheme, row.amount, row.billed],
      ["succeeded", XRPL_MAINNET, "exact", "1500", false],
    );
    assert.equal(await usedQuota(stack.accountId), usedBefore);
  });

  test("402 → pay in RLUSD → 200: the trust-line balances move by exactly 0.25", async () => {
    const wallet = payer(1);
    const before = rlusdOf(wallet.classicAddress);
    const payToBefore = rlusdOf(stack.families.xrpl!.info.payTo);
    const client = new x402Client().register(
      "xrpl:*",
      new ExactXrplClientScheme(wallet, { client: ws }),
    );
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/rlusd`);
    assert.equal(res.status, 200, res.headers.get("payment-required") ?? "");
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(Number(rlusdOf(wallet.classicAddress)), Number(before) - 0.25);
    assert.equal(Number(rlusdOf(stack.families.xrpl!.info.payTo)), Number(payToBefore) + 0.25);
    const row = await rowOf(receipt.transaction);
    assert.deepEqual([row.status, row.amount], ["succeeded", "0.25"]);
  });

  test("an account at its quota limit still settles on xrpl:0, and nothing is counted", async () => {
    const account = await createAccount(stack.service.db, "xrpl-at-limit");
    await stack.service.db
      .insertInto("quota_usage")
      .values({ account_id: account.id, month: monthOf(new Date()), used: 10_000 })
      .execute();
    const key = await createApiKey(stack.service.db, account.id, "xrpl-at-limit");
    const req = requirements({ amount: "3000" });
    const res = await post(stack.url, "/settle", body(req, await sign(payer(2), req)), key.key);
    const out = (await res.json()) as { success: boolean; transaction: string };
    assert.equal(res.status, 200);
    assert.equal(out.success, true, JSON.stringify(out));
    assert.equal(await usedQuota(account.id), 10_000);
    assert.equal((await rowOf(out.transaction)).account_id, account.id);
  });

  test("each verify negative answers its own reason and moves nothing", async () => {
    const wallet = payer(3);
    const base = requirements();
    const stranger = devnetXrplWallet("e2e stranger");
    const before = ledger().xrpBalance(wallet.classicAddress);
    const seq = ledger().account(wallet.classicAddress)!.Sequence;
    const validated = ledger().validatedIndex;
    const cases: [string, PaymentRequirements, () => Promise<string>][] = [
      [
        "invalid_exact_xrpl_destination",
        base,
        () => sign(wallet, base, { Destination: stranger.classicAddress }),
      ],
      ["invalid_exact_xrpl_amount", base, () => sign(wallet, base, { Amount: "1999" })],
      ["invalid_exact_xrpl_partial_payment", base, () => sign(wallet, base, { Flags: 0x00020000 })],
      ["invalid_exact_xrpl_fee_too_high", base, () => sign(wallet, base, { Fee: "20000" })],
      [
        "invalid_exact_xrpl_last_ledger_sequence",
        base,
        () => sign(wallet, base, { LastLedgerSequence: validated + 500 }),
      ],
      [
        "invalid_exact_xrpl_expired",
        base,
        () => sign(wallet, base, { LastLedgerSequence: validated - 1 }),
      ],
      ["invalid_exact_xrpl_sequence", base, () => sign(wallet, base, { Sequence: seq + 3 })],
      ["invalid_exact_xrpl_network_id", base, () => sign(wallet, base, { NetworkID: 0 })],
      [
        "invalid_exact_xrpl_signer_not_authorized",
        base,
        async () => {
          const tx = await ws.autofill({ ...paymentFor(wallet.classicAddress, base) });
          return stranger.sign(tx).tx_blob;
        },
      ],
      [
        "invalid_exact_xrpl_asset",
        requirements({ asset: RLUSD_CURRENCY, amount: "1", extra: { issuer: RLUSD_ISSUER } }),
        () => sign(wallet, base),
      ],
      [
        "invalid_exact_xrpl_invoice",
        requirements({ extra: { invoiceId: "inv-42" } }),
        () => sign(wallet, requirements({ extra: { invoiceId: "inv-41" } })),
      ],
      [
        "invalid_exact_xrpl_no_trust_line",
        requirements({
          asset: RLUSD_CURRENCY,
          amount: "1",
          extra: { issuer: RLUSD_ISSUER },
          payTo: stranger.classicAddress,
        }),
        () =>
          sign(
            wallet,
            requirements({
              asset: RLUSD_CURRENCY,
              amount: "1",
              extra: { issuer: RLUSD_ISSUER },
              payTo: stranger.classicAddress,
            }),
          ),
      ],
      [
        "insufficient_funds",
        requirements({ amount: (before * 2n).toString() }),
        () => sign(wallet, requirements({ amount: (before * 2n).toString() })),
      ],
      [
        "invalid_exact_xrpl_signature",
        base,
        async () => {
          const blob = await sign(wallet, base);
          // The last byte of a signed payment belongs to a field the signature covers (Destination).
          return blob.slice(0, -2) + (blob.endsWith("00") ? "01" : "00");
        },
      ],
      ["invalid_exact_xrpl_payload", base, async () => "ABCD"],
      [
        // RLUSD's code from another issuer is another asset: not settled here.
        "unsupported_asset",
        requirements({
          asset: RLUSD_CURRENCY,
          amount: "1",
          extra: { issuer: stranger.classicAddress },
        }),
        () => sign(wallet, base),
      ],
    ];
    // The stranger must exist for a trust-line miss to be tecPATH_DRY rather than tecNO_DST.
    ledger().fund(stranger.classicAddress, 50_000_000n);
    for (const [reason, req, make] of cases) {
      const out = await verify(req, await make());
      assert.equal(out.isValid, false, reason);
      assert.equal(out.invalidReason, reason, `${reason}: ${out.invalidMessage}`);
    }
    assert.equal(ledger().xrpBalance(wallet.classicAddress), before);
    assert.equal(ledger().account(wallet.classicAddress)!.Sequence, seq);
    // And the well-formed one is valid.
    assert.deepEqual(await verify(base, await sign(wallet, base)), {
      isValid: true,
      payer: wallet.classicAddress,
    });
  });

  test("a payment held until its LastLedgerSequence passes: success false, nothing moved, the row failed", async () => {
    const wallet = payer(4);
    const req = requirements({ amount: "4321" });
    const blob = await sign(wallet, req, { LastLedgerSequence: ledger().validatedIndex + 3 });
    const before = ledger().xrpBalance(wallet.classicAddress);
    ledger().withhold = true;
    let out: { success: boolean; errorReason?: string; transaction: string };
    try {
      const res = await post(stack.url, "/settle", body(req, blob), stack.apiKey);
      assert.equal(res.status, 200);
      out = (await res.json()) as typeof out;
    } finally {
      ledger().release();
    }
    assert.equal(out.success, false);
    assert.equal(out.errorReason, "invalid_exact_xrpl_expired");
    assert.equal(ledger().xrpBalance(wallet.classicAddress), before);
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "error_reason"])
      .where("payer", "=", wallet.classicAddress)
      .where("amount", "=", "4321")
      .execute();
    assert.deepEqual(rows, [{ status: "failed", error_reason: "invalid_exact_xrpl_expired" }]);
  });
});
