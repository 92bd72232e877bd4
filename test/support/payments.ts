/**
 * Builds payment payloads exactly as a real payer would: with the official
 * `@x402/evm` exact client scheme and a devnet payer key.
 */
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
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
  const scheme = new ExactEvmScheme(privateKeyToAccount(payerKey));
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

export function post(
  url: string,
  path: string,
  body: unknown,
  apiKey?: string,
  headers: Record<string, string> = {},
) {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(apiKey ? { "x-api-key": apiKey } : {}),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}
