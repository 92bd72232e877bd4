/**
 * Starknet requirements in both spellings of the bound executor: this
 * service's `extra.feePayer` and the foundation's merged scheme's
 * `extra.caller` with `areFeesSponsored: true`. `/supported` offers both; a
 * resource server on this project's server scheme copies both; a client
 * reading either one (this project's client scheme) pays; a payment signed
 * under one spelling settles under the other when the executor is the same;
 * an unsponsored requirement or a caller that is not ours is refused with a
 * reason that names it.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentPayload, PaymentRequirements, SupportedKind } from "@x402/core/types";
import { wrapFetchWithPayment } from "@x402/fetch";
import { Account, RpcProvider } from "starknet";
import { facilitatorClient, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { post } from "../support/http.js";
import { STARKNET_MAINNET } from "../../devnet/starknet/index.js";
import { STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import { ExactStarknetClientScheme } from "../../src/chains/starknet/clients/exactClient.js";
import { ExactStarknetServerScheme } from "../../src/chains/starknet/clients/exactServer.js";

describe("Starknet requirements with extra.feePayer or extra.caller", () => {
  let stack: TestStack;
  let server: Listening | undefined;
  let origin: string;
  let provider: RpcProvider;
  let kind: SupportedKind;

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
              price: "$0.01",
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
    const supported = (await (await fetch(`${stack.url}/supported`)).json()) as {
      kinds: SupportedKind[];
    };
    kind = supported.kinds.find((k) => k.network === STARKNET_MAINNET)!;
  });
  after(async () => {
    await server?.close();
    await stack.stop();
  });

  const info = () => stack.families.starknet!.info;
  const usdcOf = (a: string) => stack.families.starknet!.ledger.balanceOf(STARKNET_USDC, a);
  const account = (i: number) =>
    new Account({
      provider,
      address: info().payers[i]!.address,
      signer: info().payers[i]!.privateKey,
      cairoVersion: "1",
    });
  const executor = () => info().executors[0]!;
  const requirements = (extra: Record<string, unknown>): PaymentRequirements => ({
    scheme: "exact",
    network: STARKNET_MAINNET,
    asset: STARKNET_USDC,
    amount: "10000",
    payTo: info().payTo,
    maxTimeoutSeconds: 120,
    extra,
  });
  const FORMS = {
    feePayer: () => requirements({ feePayer: executor() }),
    caller: () => requirements({ caller: executor(), areFeesSponsored: true }),
  };
  /** What this project's client scheme sends for `req`. */
  const pay = async (payer: Account, req: PaymentRequirements): Promise<PaymentPayload> => {
    const result = await new ExactStarknetClientScheme(payer).createPaymentPayload(2, req);
    return { ...result, accepted: req } as PaymentPayload;
  };
  const call = async (path: "/verify" | "/settle", p: PaymentPayload, req: PaymentRequirements) =>
    (await (
      await post(
        stack.url,
        path,
        { x402Version: 2, paymentPayload: p, paymentRequirements: req },
        stack.apiKey,
      )
    ).json()) as Record<string, unknown>;

  test("GET /supported offers the executor as feePayer and as caller, with areFeesSponsored: true", () => {
    const extra = kind.extra ?? {};
    assert.equal(extra["areFeesSponsored"], true);
    assert.equal(typeof extra["feePayer"], "string");
    assert.equal(BigInt(String(extra["caller"])), BigInt(String(extra["feePayer"])));
    assert.ok(info().executors.some((e) => BigInt(e) === BigInt(String(extra["caller"]))));
  });

  test("the server scheme copies both fields; a client reading only caller pays through the resource server", async () => {
    const copied = await new ExactStarknetServerScheme().enhancePaymentRequirements(
      requirements({}),
      kind,
    );
    assert.deepEqual(
      [copied.extra?.["feePayer"], copied.extra?.["caller"], copied.extra?.["areFeesSponsored"]],
      [kind.extra?.["feePayer"], kind.extra?.["caller"], true],
    );
    // A client written to the merged scheme knows nothing of feePayer.
    const payer = account(0);
    const callerOnly = new ExactStarknetClientScheme(payer);
    const sign = callerOnly.createPaymentPayload.bind(callerOnly);
    callerOnly.createPaymentPayload = (v, req) => {
      const { feePayer: _ignored, ...extra } = req.extra ?? {};
      return sign(v, { ...req, extra });
    };
    const before = usdcOf(payer.address);
    const client = new x402Client().register("starknet:*", callerOnly);
    const res = await wrapFetchWithPayment(fetch, client)(`${origin}/report`);
    assert.equal(res.status, 200, res.headers.get("payment-required") ?? "");
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    assert.equal(usdcOf(payer.address), before - 10_000n);
  });

  for (const signedFor of ["feePayer", "caller"] as const) {
    for (const settledUnder of ["feePayer", "caller"] as const) {
      test(`signed for extra.${signedFor}, verified and settled under extra.${settledUnder}`, async () => {
        const payer = account(signedFor === "feePayer" ? 1 : 2);
        const before = usdcOf(payer.address);
        const p = await pay(payer, FORMS[signedFor]());
        const req = FORMS[settledUnder]();
        const verdict = await call("/verify", p, req);
        assert.equal(verdict["isValid"], true, JSON.stringify(verdict));
        const settled = await call("/settle", p, req);
        assert.equal(settled["success"], true, JSON.stringify(settled));
        assert.equal(usdcOf(payer.address), before - 10_000n);
      });
    }
  }

  test("areFeesSponsored: false, a caller not ours, or two different callers are refused with their reason", async () => {
    const payer = account(3);
    const before = usdcOf(payer.address);
    const p = await pay(payer, FORMS.caller());
    const cases: [string, RegExp, Record<string, unknown>][] = [
      [
        "invalid_payment_requirements",
        /areFeesSponsored must be true/,
        { caller: executor(), areFeesSponsored: false },
      ],
      [
        "invalid_exact_starknet_payload_caller",
        /extra\.caller .* is not an executor of this facilitator/,
        { caller: info().payTo, areFeesSponsored: true },
      ],
      [
        "invalid_exact_starknet_fee_payer",
        /extra\.feePayer .* is not an executor of this facilitator/,
        { feePayer: info().payTo },
      ],
      [
        "invalid_payment_requirements",
        /different accounts/,
        { feePayer: executor(), caller: info().executors[1]!, areFeesSponsored: true },
      ],
    ];
    for (const [reason, message, extra] of cases) {
      const verdict = await call("/verify", p, requirements(extra));
      assert.equal(verdict["invalidReason"], reason, JSON.stringify(extra));
      assert.match(String(verdict["invalidMessage"]), message);
      const settled = await call("/settle", p, requirements(extra));
      assert.equal(settled["success"], false);
      assert.equal(settled["errorReason"], reason);
    }
    // Signed for an executor of ours that the requirements do not name.
    const other = await call("/verify", p, requirements({ caller: info().executors[1]! }));
    assert.equal(other["invalidReason"], "invalid_exact_starknet_payload_caller");
    assert.equal(usdcOf(payer.address), before, "nothing moved");
  });
});
