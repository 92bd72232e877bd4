/**
 * Attacks on confidential settlement through the service (issue 37), each
 * against the real vault on the devnet's eip155:8453 with the fhEVM mock:
 * what an API-key holder, a payer or a replica can make the service credit.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { authorizationTypes } from "@x402/evm";
import type { PaymentRequirements } from "@x402/core/types";
import { getAddress, toHex, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { paymentRequest, post } from "../support/payments.js";
import { confidentialRequirements, enableWithNewWallet } from "../support/confidential.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";

/** An EIP-3009 authorization to `requirements.payTo` with a nonce of the caller's choosing. */
async function authorize(
  payerKey: Hex,
  requirements: PaymentRequirements,
  nonce: Hex,
  opts: { value?: string; signature?: Hex } = {},
): Promise<Record<string, unknown>> {
  const payer = privateKeyToAccount(payerKey);
  const authorization = {
    from: payer.address,
    to: getAddress(requirements.payTo),
    value: opts.value ?? requirements.amount,
    validAfter: "0",
    validBefore: String(Math.floor(Date.now() / 1000) + 3600),
    nonce,
  };
  const signature =
    opts.signature ??
    (await payer.signTypedData({
      domain: {
        name: "USD Coin",
        version: "2",
        chainId: 8453,
        verifyingContract: getAddress(requirements.asset),
      },
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: {
        ...authorization,
        value: BigInt(authorization.value),
        validAfter: BigInt(authorization.validAfter),
        validBefore: BigInt(authorization.validBefore),
      },
    }));
  return { authorization, signature };
}

interface Merchant {
  accountId: string;
  apiKey: string;
  wallet: Hex;
  slot: bigint;
}

describe("confidential settlement attacks through the service", () => {
  let stack: TestStack;

  before(async () => {
    stack = await startStack({ confidential: true, confidentialWorker: false, payers: 4 });
  });
  after(async () => stack?.stop());

  const merchant = async (name: string): Promise<Merchant> => {
    const { db, confidential } = stack.service;
    const account = await createAccount(db, name);
    const apiKey = (await createApiKey(db, account.id, "k")).key;
    const { wallet, merchant } = await enableWithNewWallet(confidential.merchants, account.id);
    return { accountId: account.id, apiKey, wallet: wallet.address, slot: merchant.slot! };
  };
  const settle = async (m: Merchant, requirements: PaymentRequirements, payload: unknown) =>
    (await (
      await post(
        stack.url,
        "/settle",
        paymentRequest(requirements, payload as Record<string, unknown>),
        m.apiKey,
      )
    ).json()) as Record<string, unknown> & {
      extensions?: { confidential?: { receipt: Record<string, string> } };
    };
  const creditsOf = (accountId: string) =>
    stack.service.db
      .selectFrom("confidential_credits")
      .select(["account_id", "amount", "payment_nonce", "merchant_address"])
      .where("account_id", "=", accountId)
      .execute();
  const offer = (m: Merchant, amount: string) =>
    confidentialRequirements({
      usdc: stack.usdc,
      vault: stack.service.confidential.vault!.address,
      merchant: m.wallet,
      amount,
    });

  test("planted credit: a bogus settle leaves nothing; the real payment is credited to its own merchant for its signed amount", async () => {
    const attacker = await merchant("attacker");
    const victim = await merchant("victim");
    const payerKey = stack.payerKeys[0]!;
    const nonce = toHex(randomBytes(32));

    // (a) The attacker settles a payment it cannot sign, with a nonce the
    // payer will use later, for an amount of its choosing.
    const huge = offer(attacker, "1000000000000");
    const bogus = await settle(
      attacker,
      huge,
      await authorize(payerKey, huge, nonce, { signature: "0x00" }),
    );
    assert.equal(bogus["success"], false, JSON.stringify(bogus));
    assert.deepEqual(await creditsOf(attacker.accountId), [], "a refused settle leaves no credit");

    // The payer's real payment with that nonce, to the victim, at its price.
    const price = offer(victim, "2500");
    const paid = await settle(victim, price, await authorize(payerKey, price, nonce));
    assert.equal(paid["success"], true, JSON.stringify(paid));
    const receipt = paid.extensions?.confidential?.receipt;
    assert.ok(receipt, "the victim gets its receipt");
    assert.equal(receipt["amount"], "2500");
    assert.equal(receipt["merchant"], victim.wallet);
    assert.equal(receipt["slot"], victim.slot.toString());
    assert.deepEqual(
      (await creditsOf(victim.accountId)).map((c) => [c.amount, c.payment_nonce]),
      [["2500", nonce]],
    );
    assert.deepEqual(await creditsOf(attacker.accountId), []);

    // (b) Inflation: a bogus settle for 10^12, then the attacker's real
    // payment of 1 with the same nonce: credited and receipted for 1.
    const nonce2 = toHex(randomBytes(32));
    await settle(attacker, huge, await authorize(payerKey, huge, nonce2, { signature: "0x00" }));
    const one = offer(attacker, "1");
    const small = await settle(attacker, one, await authorize(payerKey, one, nonce2));
    assert.equal(small["success"], true, JSON.stringify(small));
    assert.equal(small.extensions?.confidential?.receipt["amount"], "1");
    assert.deepEqual(
      (await creditsOf(attacker.accountId)).map((c) => c.amount),
      ["1"],
    );
  });
});
