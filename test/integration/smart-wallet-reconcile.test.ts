/**
 * A settlement is a success only when the payment's transfer happened. An
 * ERC-6492 payment sends two transactions: the payer wallet's deployment,
 * then the transfer. A process that died between them leaves a pending
 * record whose journal holds a mined deployment; when the transfer then
 * reverted (or was never sent), the record must end failed, unbilled, with
 * a `settlement.failed` event, and the re-presented payment must be told so,
 * not answered "paid" on the strength of the deployment's receipt.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  hashTypedData,
  http,
  parseAbi,
  serializeErc6492Signature,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { ClientEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import type { PaymentPayload } from "@x402/core/types";
import { DEVNET_WALLET_FACTORY_ADDRESS } from "../../devnet/evm/deploy.js";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";
import { paymentFingerprint } from "../../src/features/settlements/fingerprints.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000b0b0" as const;
const FACTORY_ABI = parseAbi([
  "function createAccount(address owner, uint256 salt) returns (address)",
  "function getAddress(address owner, uint256 salt) view returns (address)",
]);
const TRANSFER_ABI = parseAbi([
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
]);

describe("reconciling an ERC-6492 settlement from the chain", () => {
  let stack: TestStack;
  let client: PublicClient;

  before(async () => {
    stack = await startStack({
      networks: [NETWORK],
      env: { METER_SETTLEMENTS: "true", RECONCILE_AFTER_MS: "1000" },
    });
    client = createPublicClient({ transport: http(stack.rpcUrl) });
    await setWebhookEndpoint(stack.service.db, stack.accountId, "http://127.0.0.1:9/hook", {
      allowPrivateTargets: true,
    });
  });
  after(() => stack.stop());

  /** Sends `data` to `to` from one of the service's own signers, as the mechanism would. */
  async function sendAsService(to: Address, data: Hex, gas?: bigint) {
    const key = stack.devnet.networks[NETWORK]!.facilitatorPrivateKeys[0] as Hex;
    const wallet = createWalletClient({
      account: privateKeyToAccount(key),
      transport: http(stack.rpcUrl),
    });
    const prepared = await wallet.prepareTransactionRequest({
      chain: null,
      to,
      data,
      ...(gas ? { gas } : {}),
    });
    const raw = await wallet.signTransaction({ ...prepared, chain: null } as never);
    const hash = await client.sendRawTransaction({ serializedTransaction: raw });
    const receipt = await client.waitForTransactionReceipt({ hash });
    return { hash, raw, status: receipt.status, signer: wallet.account.address };
  }

  test("deployment mined, transfer reverted: failed, not billed, settlement.failed, and the retry is told so", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const salt = 11n;
    const wallet = await client.readContract({
      address: DEVNET_WALLET_FACTORY_ADDRESS,
      abi: FACTORY_ABI,
      functionName: "getAddress",
      args: [owner.address, salt],
    });
    const factoryCalldata = encodeFunctionData({
      abi: FACTORY_ABI,
      functionName: "createAccount",
      args: [owner.address, salt],
    });
    // The owner signs the EIP-712 digest; the 6492 wrapper names the factory.
    let inner: Hex = "0x";
    const signer: ClientEvmSigner = {
      address: wallet,
      async signTypedData(msg) {
        inner = await owner.sign({
          hash: hashTypedData(msg as Parameters<typeof hashTypedData>[0]),
        });
        return serializeErc6492Signature({
          address: DEVNET_WALLET_FACTORY_ADDRESS,
          data: factoryCalldata,
          signature: inner,
        });
      },
    };
    const requirements = requirementsFor({
      network: NETWORK,
      usdc: stack.usdc,
      payTo: PAY_TO,
      amount: "1500",
    });
    const partial = await new ExactEvmClientScheme(signer).createPaymentPayload(2, requirements);
    const paymentPayload = {
      x402Version: 2,
      accepted: requirements,
      payload: partial.payload,
    } as PaymentPayload;
    const body = { x402Version: 2, paymentPayload, paymentRequirements: requirements };
    const a = (partial.payload as { authorization: Record<string, string> }).authorization;

    // What a settle had sent when its process died: the deployment (mined),
    // then the transfer, which reverts (the unfunded wallet cannot pay).
    const deploy = await sendAsService(DEVNET_WALLET_FACTORY_ADDRESS, factoryCalldata);
    assert.equal(deploy.status, "success");
    const transfer = await sendAsService(
      stack.usdc,
      encodeFunctionData({
        abi: TRANSFER_ABI,
        functionName: "transferWithAuthorization",
        args: [
          a["from"] as Hex,
          a["to"] as Hex,
          BigInt(a["value"]!),
          BigInt(a["validAfter"]!),
          BigInt(a["validBefore"]!),
          a["nonce"] as Hex,
          inner,
        ],
      }),
      200_000n,
    );
    assert.equal(transfer.status, "reverted");

    const key = await stack.service.db
      .selectFrom("api_keys")
      .select("id")
      .where("account_id", "=", stack.accountId)
      .executeTakeFirstOrThrow();
    const id = randomUUID();
    await stack.service.db
      .insertInto("settlements")
      .values({
        id,
        account_id: stack.accountId,
        api_key_id: key.id,
        network: NETWORK,
        scheme: "exact",
        payer: wallet.toLowerCase(),
        pay_to: PAY_TO.toLowerCase(),
        asset: stack.usdc.toLowerCase(),
        amount: "1500",
        payload_fingerprint: paymentFingerprint(body),
        status: "pending",
        transaction: deploy.hash,
        error_reason: null,
        error_message: null,
        started_at: new Date(Date.now() - 60_000),
        finished_at: null,
        duration_ms: null,
        request: JSON.stringify(body),
        units: 1,
        authorization_key:
          `${NETWORK}:eip3009:${stack.usdc}:${a["from"]}:${a["nonce"]}`.toLowerCase(),
      })
      .execute();
    await stack.service.db
      .insertInto("settlement_transactions")
      .values(
        [deploy, transfer].map((t) => ({
          reference: t.hash,
          settlement_id: id,
          network: NETWORK,
          signer: t.signer.toLowerCase(),
          replaces: null,
          detail: JSON.stringify({ raw: t.raw }),
        })),
      )
      .execute();

    // The payer's client re-presents the payment: its outcome comes from the chain.
    const answer = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as {
      success: boolean;
      errorReason?: string;
      transaction: string;
    };
    assert.deepEqual(
      [answer.success, answer.errorReason, answer.transaction],
      [false, "invalid_exact_evm_transaction_failed", ""],
      JSON.stringify(answer),
    );
    const row = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "billed", "success_answered_at"])
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { status: "failed", billed: false, success_answered_at: null });
    const events = await stack.service.db
      .selectFrom("webhook_events")
      .select("type")
      .where("settlement_id", "=", id)
      .execute();
    assert.deepEqual(
      events.map((e) => e.type),
      ["settlement.failed"],
    );
    const usage = await stack.service.db
      .selectFrom("quota_usage")
      .select("used")
      .where("account_id", "=", stack.accountId)
      .executeTakeFirst();
    assert.equal(usage?.used ?? 0, 0, "nothing billed");
  });
});
