/**
 * Confidential settlement helpers for tests: a merchant enabled with a
 * wallet (a new one, or a signed-in user's with its API key), the
 * confidential offer's requirements, and a withdrawal request's
 * typed data back from JSON (the dashboard sends it with decimal strings; a
 * wallet signs bigints).
 */
import type { PaymentRequirements } from "@x402/core/types";
import {
  createTestClient,
  http,
  type Address,
  type PrivateKeyAccount,
  type TypedDataDefinition,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createApiKey } from "../../../src/features/keys/apiKeys.js";
import type { ConfidentialMerchants } from "../../../src/features/confidential/merchants.js";
import type { ConfidentialVault } from "../../../src/features/confidential/vaultPort.js";
import { requirementsFor } from "./payments.js";
import { signedInUser, type DashboardUser } from "../../support/dashboardSession.js";
import type { TestStack } from "../../support/stack.js";

/** Enables `accountId` with `wallet`, signing the enablement message as the dashboard's wallet does. */
async function enableWithWallet(
  merchants: ConfidentialMerchants,
  accountId: string,
  wallet: PrivateKeyAccount,
  viewer?: Address,
) {
  const message = merchants.enablementMessage(wallet.address, accountId);
  return merchants.enable(accountId, wallet.address, await wallet.signMessage({ message }), viewer);
}

/** Enables `accountId` with a new wallet, signing the enablement message as the dashboard's wallet does. */
export async function enableWithNewWallet(merchants: ConfidentialMerchants, accountId: string) {
  const wallet = privateKeyToAccount(generatePrivateKey());
  const merchant = await enableWithWallet(merchants, accountId, wallet);
  return { wallet, merchant };
}

/**
 * A signed-in dashboard user with an API key, its account enabled for
 * confidential settlement with `wallet` (and `viewer` as its slot's viewer).
 */
export async function enabledMerchant(
  stack: TestStack,
  wallet: PrivateKeyAccount,
  viewer?: Address,
): Promise<{ user: DashboardUser; apiKey: string }> {
  const user = await signedInUser(stack.service.db, stack.url);
  const apiKey = (await createApiKey(stack.service.db, user.accountId, "shop")).key;
  await enableWithWallet(stack.service.confidential.merchants, user.accountId, wallet, viewer);
  return { user, apiKey };
}

export function confidentialRequirements(opts: {
  usdc: string;
  vault: Address;
  merchant: Address;
  amount?: string;
}): PaymentRequirements {
  return {
    ...requirementsFor({
      network: "eip155:8453",
      usdc: opts.usdc,
      payTo: opts.vault,
      ...(opts.amount ? { amount: opts.amount } : {}),
    }),
    extra: {
      name: "USD Coin",
      version: "2",
      confidential: true,
      merchant: opts.merchant,
      assetTransferMethod: "eip3009",
    },
  };
}

export function withdrawTypedDataFromJson(t: Record<string, unknown>): TypedDataDefinition {
  const message = t["message"] as Record<string, string>;
  const domain = t["domain"] as Record<string, unknown>;
  return {
    ...(t as unknown as TypedDataDefinition),
    domain: { ...domain, chainId: Number(domain["chainId"]) },
    message: {
      slot: BigInt(message["slot"]!),
      to: message["to"],
      amount: BigInt(message["amount"]!),
      nonce: BigInt(message["nonce"]!),
      deadline: BigInt(message["deadline"]!),
    },
  } as TypedDataDefinition;
}

/**
 * Moves the chain past its next 00:00 UTC (plus `afterSeconds`) and returns
 * that instant, for the service's clock: the day that just ended is then
 * open to its batch on both.
 */
export async function pastNextMidnight(
  rpcUrl: string,
  vault: { chainTime(): Promise<bigint> },
  afterSeconds = 30,
): Promise<Date> {
  const chainNow = Number(await vault.chainTime());
  const at = (Math.floor(chainNow / 86_400) + 1) * 86_400 + afterSeconds;
  const testClient = createTestClient({ mode: "anvil", transport: http(rpcUrl) });
  await testClient.setNextBlockTimestamp({ timestamp: BigInt(at) });
  await testClient.mine({ blocks: 1 });
  return new Date(at * 1000);
}

/**
 * The theft a challenge exists for: the operator key enables a slot of its
 * own and credits the whole of `day`'s pool to it, so the merchants whose
 * receipts the pool holds are credited nothing. Returns the thief's slot.
 */
export async function creditDayToOperatorsOwnSlot(
  vault: Pick<ConfidentialVault, "enablementMessage" | "assignSlot" | "dayInfo" | "creditDay">,
  day: number,
): Promise<{ slot: bigint; pool: bigint; releasableAfter: bigint | null }> {
  const thief = privateKeyToAccount(generatePrivateKey());
  const walletSignature = await thief.signMessage({
    message: vault.enablementMessage(thief.address, "thief"),
  });
  const { slot } = await vault.assignSlot({
    merchant: thief.address,
    accountRef: "thief",
    walletSignature,
  });
  const { pool } = await vault.dayInfo(day);
  const { releasableAfter } = await vault.creditDay({ day, credits: [{ slot, amount: pool }] });
  return { slot, pool, releasableAfter };
}
