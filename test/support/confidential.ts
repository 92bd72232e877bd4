/**
 * Confidential settlement helpers for tests: the confidential offer's
 * requirements, and a withdrawal request's typed data back from JSON (the
 * dashboard sends it with decimal strings; a wallet signs bigints).
 */
import type { PaymentRequirements } from "@x402/core/types";
import type { Address, TypedDataDefinition } from "viem";
import { requirementsFor } from "./payments.js";

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
