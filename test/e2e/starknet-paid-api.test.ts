/**
 * Starknet `exact` through this service: an `@x402/express` resource server
 * with `HTTPFacilitatorClient` pointed at us, paid with this project's
 * Starknet client scheme (no official one is published) through
 * `@x402/fetch`, against the local Starknet. Balances and events are read
 * from the ledger; records from the database.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentRequirements } from "@x402/core/types";
import { wrapFetchWithPayment } from "@x402/fetch";
import { Account, RpcProvider, stark, type TypedData } from "starknet";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { paymentRequest } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { STARKNET_MAINNET, devnetStarknetAccount } from "../../devnet/starknet/index.js";
import { TRANSFER_EVENT_KEY } from "../../devnet/starknet/ledger.js";
import { STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import {
  ExactStarknetClientScheme,
  outsideExecutionFor,
} from "../../src/chains/starknet/clients/exactClient.js";
import { ExactStarknetServerScheme } from "../../src/chains/starknet/clients/exactServer.js";

describe("Starknet end to end through the service", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let origin: string;
  let provider: RpcProvider;

  before(async () => {
    stack = await startStack({ families: { starknet: {} } });
    provider = new RpcProvider({ nodeUrl: stack.families.starknet!.info.rpcUrl });
    const resourceServer = new x402ResourceServer(facilitatorClient(stack)).register(
      STARKNET_MAINNET,
      new ExactStarknetServerScheme(),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /report": {
            accepts: {
              scheme: "exact",
              price: "$0.25",
              network: STARKNET_MAINNET,
              payTo: stack.families.starknet!.info.payTo,
            },
            description: "Paid in USDC on Starknet",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/report", (_req, res) => void res.json({ paid: "starknet" }));
    server = await listenOnLoopback(app);
    origin = server.origin;
  });
  after(async () => {
    await server?.close();
    await stack.stop();
  });

  const ledger = () => stack.families.starknet!.ledger;
  const info = () => stack.families.starknet!.info;
  const usdcOf = (a: string) => ledger().balanceOf(STARKNET_USDC, a);
  const account = (i: number) =>
    new Account({
      provider,
      address: info().payers[i]!.address,
      signer: info().payers[i]!.privateKey,
      cairoVersion: "1",
    });
  const executor = () => info().executors[0]!;
  const requirements = (fields: Partial<PaymentRequirements> = {}): PaymentRequirements => ({
    scheme: "exact",
    network: STARKNET_MAINNET,
    asset: STARKNET_USDC,
    amount: "10000",
    payTo: info().payTo,
    maxTimeoutSeconds: 120,
    extra: { feePayer: executor() },
    ...fields,
  });
  /** A payload signed as the client scheme signs it, with the typed data changed before signing. */
  const sign = async (
    signer: Account,
    req: PaymentRequirements,
    edit: (td: TypedData) => TypedData = (td) => td,
    opts: { from?: string; nonce?: string; nowSeconds?: number } = {},
  ) => {
    const from = opts.from ?? signer.address;
    const typedData = edit(
      outsideExecutionFor(from, req, {
        nonce: opts.nonce ?? stark.randomAddress(),
        nowSeconds: opts.nowSeconds ?? Math.floor(Date.now() / 1000),
      }),
    );
    const signature = stark.formatSignature(await signer.signMessage(typedData));
    return { from, outsideExecution: { typedData, signature } };
  };
  const verify = async (req: PaymentRequirements, payload: Record<string, unknown>) =>
    (await (
      await post(stack.url, "/verify", paymentRequest(req, payload), stack.apiKey)
    ).json()) as {
      isValid: boolean;
      invalidReason?: string;
      invalidMessage?: string;
      payer?: string;
    };
  const settle = async (req: PaymentRequirements, payload: Record<string, unknown>) =>
    (await (
      await post(stack.url, "/settle", paymentRequest(req, payload), stack.apiKey)
    ).json()) as {
      success: boolean;
      transaction: string;
      errorReason?: string;
      errorMessage?: string;
    };
  const rowsOf = (transaction: string) =>
    stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", transaction)
      .execute();

  test("GET /supported lists exact on starknet:SN_MAIN with a feePayer, and the executors under starknet:*", async () => {
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      kinds: { network: string; scheme: string; extra?: Record<string, unknown> }[];
      signers: Record<string, string[]>;
    };
    const kind = supported.kinds.find((k) => k.network === STARKNET_MAINNET);
    assert.equal(kind?.scheme, "exact");
    const executors = info().executors.map((a) => BigInt(a));
    assert.ok(executors.includes(BigInt(String(kind?.extra?.["feePayer"]))));
    assert.deepEqual(
      supported.signers["starknet:*"]?.map((a) => BigInt(a)).sort(),
      [...executors].sort(),
    );
  });

  test("402 → pay → 200: the price moves once, the Transfer event is on the receipt, the executor pays the fee, recorded", async () => {
    const payer = account(0);
    const [before, payToBefore] = [usdcOf(payer.address), usdcOf(info().payTo)];
    const client = new x402Client().register("starknet:*", new ExactStarknetClientScheme(payer));
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/report`);
    assert.equal(res.status, 200, res.headers.get("payment-required") ?? "");
    assert.deepEqual(await res.json(), { paid: "starknet" });
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(usdcOf(payer.address), before - 250_000n);
    assert.equal(usdcOf(info().payTo), payToBefore + 250_000n);
    const tx = ledger().transaction(receipt.transaction)!;
    assert.deepEqual([tx.finality, tx.execution], ["ACCEPTED_ON_L2", "SUCCEEDED"]);
    const transfers = tx.events.filter(
      (e) =>
        BigInt(e.from_address) === BigInt(STARKNET_USDC) &&
        BigInt(e.keys[0]!) === TRANSFER_EVENT_KEY,
    );
    assert.deepEqual(
      transfers.map((e) => [BigInt(e.keys[1]!), BigInt(e.keys[2]!), BigInt(e.data[0]!)]),
      [[BigInt(payer.address), BigInt(info().payTo), 250_000n]],
    );
    assert.ok(tx.fee > 0n, "the executor paid a fee");
    assert.equal(BigInt(tx.sender), BigInt(String(receipt.transaction && tx.tx.sender_address)));
    const rows = await rowsOf(receipt.transaction);
    assert.deepEqual(
      rows.map((r) => [r.status, r.network, r.scheme, r.amount]),
      [["succeeded", STARKNET_MAINNET, "exact", "250000"]],
    );
  });

  test("each verify negative answers its own reason and moves nothing", async () => {
    const payer = account(1);
    const base = requirements();
    const now = Math.floor(Date.now() / 1000);
    const before = usdcOf(payer.address);
    const nonceBefore = ledger().nonceOf(payer.address);
    const stranger = devnetStarknetAccount("e2e stranger");
    const strangerAccount = new Account({
      provider,
      address: stranger.address,
      signer: stranger.privateKey,
      cairoVersion: "1",
    });
    const other = info().payers[2]!.address;
    const message = (td: TypedData) => td.message as Record<string, unknown>;
    const firstCall = (td: TypedData) =>
      (message(td)["Calls"] as Record<string, unknown>[])[0] as { Calldata: string[] };
    const cases: [string, PaymentRequirements, () => Promise<Record<string, unknown>>][] = [
      [
        "invalid_exact_starknet_payload_caller",
        base,
        () => sign(payer, requirements({ extra: { feePayer: info().executors[1]! } })),
      ],
      [
        "invalid_exact_starknet_payload_amount_mismatch",
        base,
        () => sign(payer, requirements({ amount: "9999" })),
      ],
      [
        "invalid_exact_starknet_payload_recipient_mismatch",
        base,
        () => sign(payer, requirements({ payTo: other })),
      ],
      [
        "invalid_exact_starknet_payload_asset_mismatch",
        base,
        () => sign(payer, requirements({ asset: info().feeToken.STRK })),
      ],
      [
        "invalid_exact_starknet_payload_calls",
        base,
        () =>
          sign(payer, base, (td) => {
            const calls = message(td)["Calls"] as unknown[];
            message(td)["Calls"] = [calls[0], calls[0]];
            return td;
          }),
      ],
      [
        "invalid_exact_starknet_payload_amount_mismatch",
        base,
        () =>
          sign(payer, base, (td) => {
            // The same value, with a low limb of 2^128 + amount: out of u128.
            firstCall(td).Calldata[1] = `0x${((1n << 128n) + 10000n).toString(16)}`;
            return td;
          }),
      ],
      [
        "invalid_exact_starknet_payload_expired",
        base,
        () => sign(payer, base, undefined, { nowSeconds: now - 110 }),
      ],
      [
        "invalid_exact_starknet_payload_window_exceeds_max_timeout",
        base,
        () => sign(payer, requirements({ maxTimeoutSeconds: 3600 })),
      ],
      [
        "invalid_exact_starknet_payload_execute_after",
        base,
        () =>
          sign(payer, base, (td) => {
            message(td)["Execute After"] = `0x${(now + 5).toString(16)}`;
            return td;
          }),
      ],
      [
        "invalid_exact_starknet_payload_signature",
        base,
        () => sign(account(2), base, undefined, { from: payer.address }),
      ],
      [
        "invalid_exact_starknet_payload_typed_data",
        base,
        () =>
          sign(payer, base, (td) => ({
            ...td,
            domain: { ...td.domain, name: "Account.execute_from_inside" },
          })),
      ],
      [
        "invalid_exact_starknet_payload_chain_id",
        base,
        () =>
          sign(payer, base, (td) => ({ ...td, domain: { ...td.domain, chainId: "SN_SEPOLIA" } })),
      ],
      ["invalid_exact_starknet_account_not_deployed", base, () => sign(strangerAccount, base)],
      [
        "insufficient_funds",
        requirements({ amount: (before * 2n).toString() }),
        () => sign(payer, requirements({ amount: (before * 2n).toString() })),
      ],
      ["invalid_exact_starknet_fee_payer", requirements({ extra: {} }), () => sign(payer, base)],
      [
        "invalid_exact_starknet_fee_payer",
        requirements({ extra: { feePayer: other } }),
        () => sign(payer, requirements({ extra: { feePayer: other } })),
      ],
      [
        "invalid_exact_starknet_fee_payer",
        requirements({ extra: { feePayer: "0x414e595f43414c4c4552" } }),
        () => sign(payer, base),
      ],
    ];
    for (const [reason, req, make] of cases) {
      const out = await verify(req, await make());
      assert.equal(out.isValid, false, reason);
      assert.equal(out.invalidReason, reason, `${reason}: ${out.invalidMessage}`);
    }
    // A settle of a bad payment is refused the same way and sends nothing.
    const refused = await settle(base, await sign(payer, requirements({ amount: "9999" })));
    assert.deepEqual(
      [refused.success, refused.errorReason, refused.transaction],
      [false, "invalid_exact_starknet_payload_amount_mismatch", ""],
    );
    assert.equal(usdcOf(payer.address), before);
    assert.equal(ledger().nonceOf(payer.address), nonceBefore);
    // And the well-formed one is valid.
    const good = await verify(base, await sign(payer, base));
    assert.equal(good.isValid, true, good.invalidMessage);
    assert.equal(BigInt(good.payer!), BigInt(payer.address));
  });
});
