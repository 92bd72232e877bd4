/**
 * Builds payment payloads exactly as a real payer would: with the official
 * `@x402/evm` exact client scheme and a devnet payer key.
 */
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import type { ClientEvmSigner } from "@x402/evm";
import { privateKeyToAccount } from "viem/accounts";
import { createPublicClient, erc20Abi, http, type Hex } from "viem";

export function requirementsFor(opts: {
  network: string;
  usdc: string;
  payTo: string;
  amount?: string;
  maxTimeoutSeconds?: number;
}): PaymentRequirements {
  return {
    scheme: "exact",
    network: opts.network as PaymentRequirements["network"],
    asset: opts.usdc,
    amount: opts.amount ?? "10000",
    payTo: opts.payTo,
    maxTimeoutSeconds: opts.maxTimeoutSeconds ?? 300,
    extra: { name: "USD Coin", version: "2" },
  };
}

export async function signPayment(
  payerKey: Hex,
  requirements: PaymentRequirements,
): Promise<PaymentPayload> {
  return signPaymentWith(privateKeyToAccount(payerKey), requirements);
}

/** The same payment signed by `signer`: a key, or a contract wallet's own signer. */
export async function signPaymentWith(
  signer: ClientEvmSigner,
  requirements: PaymentRequirements,
): Promise<PaymentPayload> {
  const scheme = new ExactEvmScheme(signer);
  const partial = await scheme.createPaymentPayload(2, requirements);
  return {
    x402Version: 2,
    accepted: requirements,
    payload: partial.payload,
    resource: {
      url: "http://127.0.0.1/resource",
      description: "test",
      mimeType: "application/json",
    },
  } as PaymentPayload;
}

export async function usdcBalance(rpcUrl: string, usdc: Hex, who: Hex): Promise<bigint> {
  const client = createPublicClient({ transport: http(rpcUrl) });
  return client.readContract({
    address: usdc,
    abi: erc20Abi,
    functionName: "balanceOf",
    args: [who],
  });
}

/** The body of `/verify` and `/settle` for a scheme payload, as the official client sends it. */
export function paymentRequest(
  requirements: PaymentRequirements,
  payload: Record<string, unknown>,
) {
  return {
    x402Version: 2,
    paymentPayload: { x402Version: 2, accepted: requirements, payload } as PaymentPayload,
    paymentRequirements: requirements,
  };
}
