/**
 * /verify against a real chain: one valid payment, and each way a payment
 * can be wrong, answered as HTTP 200 with `isValid: false` and a specific
 * reason. Verification never moves money: balances are checked unchanged.
 *
 * The suite runs twice: verified on the service's own thread, and on a verify
 * thread (its own copy of the EVM family and engine). Every answer must be
 * the same, and in the second run each EVM verification must have been
 * answered by the thread.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createWalletClient, http, parseAbi, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { nowSeconds, signAuthorization } from "../chains/evm/authorization.js";
import { until } from "../support/processes.js";

const PAY_TO = "0x1111111111111111111111111111111111111111" as Hex;

const MODES: { name: string; env: Record<string, string>; onThread: boolean }[] = [
  { name: "on the service's thread", env: { EVM_VERIFY_THREADS: "0" }, onThread: false },
  {
    name: "on a verify thread",
    env: { EVM_VERIFY_THREADS: "1", EVM_VERIFY_THREADS_ABOVE: "0" },
    onThread: true,
  },
];

for (const mode of MODES)
  describe(`POST /verify ${mode.name}`, () => {
    let stack: TestStack;
    let payerKey: Hex;

    before(async () => {
      stack = await startStack({ env: mode.env });
      payerKey = stack.payerKeys[1]!;
      if (mode.onThread) {
        await until(
          "the verify thread",
          async () => stack.service.facilitator.threads?.readyCount === 1,
        );
      }
    });
    after(() => stack.stop());

    const answeredOnThread = async () =>
      (await stack.service.metrics.verifiedOnThread.get()).values[0]?.value ?? 0;

    const reqs = (over: Partial<Parameters<typeof requirementsFor>[0]> = {}) =>
      requirementsFor({ network: stack.network, usdc: stack.usdc, payTo: PAY_TO, ...over });

    async function verify(body: unknown) {
      // Everything for a served EVM network that passes the request schema
      // reaches the engine, and so the thread.
      const { network } = (body as { paymentRequirements: { network: string } })
        .paymentRequirements;
      const viaThread = mode.onThread && network === stack.network;
      const threadBefore = await answeredOnThread();
      const res = await post(stack.url, "/verify", body, stack.apiKey);
      assert.equal(res.status, 200, "a processed verification is HTTP 200");
      assert.equal(
        (await answeredOnThread()) - threadBefore,
        viaThread ? 1 : 0,
        "verifications answered by the verify thread",
      );
      return (await res.json()) as {
        isValid: boolean;
        invalidReason?: string;
        invalidMessage?: string;
        payer?: string;
      };
    }

    const verifyPayment = (paymentPayload: unknown, paymentRequirements: unknown) =>
      verify({ x402Version: 2, paymentPayload, paymentRequirements });

    test("a payment signed by the official client is valid and names the payer; nothing moves", async () => {
      const requirements = reqs();
      const payer = privateKeyToAccount(payerKey).address;
      const before = await usdcBalance(stack.rpcUrl, stack.usdc, payer);
      const payload = await signPayment(payerKey, requirements);
      const result = await verifyPayment(payload, requirements);
      assert.deepEqual(result, { isValid: true, payer });
      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, payer), before);
      const rows = await stack.service.db.selectFrom("settlements").selectAll().execute();
      assert.equal(rows.length, 0, "verify records no settlement");
    });

    test("requirements without extra.name/version are completed from the token's on-chain domain", async () => {
      const requirements = reqs();
      const payload = await signPayment(payerKey, requirements);
      const { extra: _extra, ...bare } = requirements;
      const result = await verifyPayment(payload, bare);
      assert.equal(result.isValid, true);
    });

    test("a domain name the token does not use is named plainly", async () => {
      const requirements = { ...reqs(), extra: { name: "Wrong Coin", version: "2" } };
      const payload = await signPayment(payerKey, requirements);
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_exact_evm_eip712_domain_mismatch");
      assert.match(result.invalidMessage ?? "", /USD Coin/);
    });

    test("bad signature: signed by someone other than `from`", async () => {
      const requirements = reqs();
      const payload = await signPayment(payerKey, requirements);
      const forged = await signPayment(stack.payerKeys[2]!, requirements);
      const inner = payload.payload as { signature: string };
      inner.signature = (forged.payload as { signature: string }).signature;
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_exact_evm_signature");
    });

    test("insufficient funds: a payer holding no USDC", async () => {
      const requirements = reqs();
      const payload = await signPayment(generatePrivateKey(), requirements);
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "insufficient_funds");
    });

    test("amount below the requirement", async () => {
      const requirements = reqs({ amount: "10000" });
      const payload = await signAuthorization(payerKey, requirements, {
        to: PAY_TO,
        value: 9999n,
        validAfter: 0n,
        validBefore: nowSeconds() + 300n,
      });
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_exact_evm_payload_authorization_value_mismatch");
    });

    test("wrong payTo", async () => {
      const requirements = reqs();
      const payload = await signPayment(payerKey, {
        ...requirements,
        payTo: "0x2222222222222222222222222222222222222222",
      });
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_exact_evm_recipient_mismatch");
    });

    test("expired: validBefore has passed", async () => {
      const requirements = reqs();
      const payload = await signAuthorization(payerKey, requirements, {
        to: PAY_TO,
        value: 10000n,
        validAfter: 0n,
        validBefore: nowSeconds() - 10n,
      });
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_exact_evm_payload_authorization_valid_before");
    });

    test("not yet valid: validAfter is in the future", async () => {
      const requirements = reqs();
      const payload = await signAuthorization(payerKey, requirements, {
        to: PAY_TO,
        value: 10000n,
        validAfter: nowSeconds() + 3600n,
        validBefore: nowSeconds() + 7200n,
      });
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_exact_evm_payload_authorization_valid_after");
    });

    test("replay: a payment this service settled and answered as paid", async () => {
      const requirements = reqs();
      const payload = await signPayment(payerKey, requirements);
      const body = { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements };
      const settled = await post(stack.url, "/settle", body, stack.apiKey);
      assert.equal(((await settled.json()) as { success: boolean }).success, true);
      const result = await verify(body);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "duplicate_settlement");
    });

    test("replay: an authorization nonce already used on-chain by someone else", async () => {
      const requirements = reqs();
      const payload = await signPayment(payerKey, requirements);
      const { authorization: a, signature } = payload.payload as {
        authorization: Record<string, string>;
        signature: Hex;
      };
      // Submitted straight to the token by another account: the chain alone knows.
      await createWalletClient({
        account: privateKeyToAccount(stack.payerKeys[0]!),
        transport: http(stack.rpcUrl),
      }).writeContract({
        chain: null,
        address: stack.usdc,
        abi: parseAbi([
          "function transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
        ]),
        functionName: "transferWithAuthorization",
        args: [
          a["from"] as Hex,
          a["to"] as Hex,
          BigInt(a["value"]!),
          BigInt(a["validAfter"]!),
          BigInt(a["validBefore"]!),
          a["nonce"] as Hex,
          signature,
        ],
      });
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_exact_evm_nonce_already_used");
    });

    test("unsupported network", async () => {
      const requirements = reqs({ network: "eip155:1" });
      const payload = await signPayment(payerKey, requirements);
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "invalid_network");
    });

    test("unsupported scheme", async () => {
      const requirements = { ...reqs(), scheme: "streaming" };
      const payload = await signPayment(payerKey, reqs());
      const result = await verifyPayment(payload, requirements);
      assert.equal(result.isValid, false);
      assert.equal(result.invalidReason, "unsupported_scheme");
    });

    test("wrong x402Version, at the top level and inside paymentPayload", async () => {
      const requirements = reqs();
      const payload = await signPayment(payerKey, requirements);
      const top = await verify({
        x402Version: 1,
        paymentPayload: payload,
        paymentRequirements: requirements,
      });
      assert.equal(top.isValid, false);
      assert.equal(top.invalidReason, "invalid_x402_version");
      const inner = await verify({
        x402Version: 2,
        paymentPayload: { ...payload, x402Version: 3 },
        paymentRequirements: requirements,
      });
      assert.equal(inner.isValid, false);
      assert.equal(inner.invalidReason, "invalid_x402_version");
    });
  });
