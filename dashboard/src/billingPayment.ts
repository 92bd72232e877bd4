// Paying for a plan from the browser: the official x402 client
// (@x402/fetch with @x402/evm's exact scheme) against the checkout, which
// answers 402 with PAYMENT-REQUIRED until paid. The payer's own wallet
// (EIP-1193) signs; on the devnet, a funded devnet key may sign instead.
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { createWalletClient, custom, getAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ApiError, currentCsrfToken } from "./api.js";

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

/** What signs the payment: an address and EIP-712 signing, as the exact scheme asks. */
export interface PaymentSigner {
  readonly address: `0x${string}`;
  signTypedData(message: {
    domain: Record<string, unknown>;
    types: Record<string, unknown>;
    primaryType: string;
    message: Record<string, unknown>;
  }): Promise<`0x${string}`>;
}

/**
 * The browser wallet's account, on the billing network's chain: wallets
 * sign typed data for the chain they are on, so it is switched first.
 */
export async function browserWalletSigner(chainId: number): Promise<PaymentSigner> {
  const eth = (window as unknown as { ethereum?: Eip1193 }).ethereum;
  if (!eth) {
    throw new Error("No browser wallet was found. Open this page in a browser with a wallet.");
  }
  const accounts = (await eth.request({ method: "eth_requestAccounts" })) as string[];
  if (!accounts[0]) throw new Error("The wallet shared no account.");
  const address = getAddress(accounts[0]);
  const current = Number.parseInt(String(await eth.request({ method: "eth_chainId" })), 16);
  if (current !== chainId) {
    await eth.request({
      method: "wallet_switchEthereumChain",
      params: [{ chainId: `0x${chainId.toString(16)}` }],
    });
  }
  const wallet = createWalletClient({ account: address, transport: custom(eth) });
  return {
    address,
    signTypedData: (m) =>
      wallet.signTypedData({ account: address, ...m } as Parameters<
        typeof wallet.signTypedData
      >[0]),
  };
}

export function devnetSigner(privateKey: string): PaymentSigner {
  return privateKeyToAccount(privateKey as Hex);
}

export interface CheckoutResult {
  status: number;
  body: Record<string, unknown>;
}

/**
 * Buys `order` through the checkout with the official x402 client. The
 * client pays at most the price the person was shown (its spend cap), on
 * the network the signer's chain is, when it is offered.
 */
export async function payThroughCheckout(
  order: { plan: string } | { topUpUsd: string },
  priceUsd: string,
  signer: PaymentSigner,
  chainId: number,
): Promise<CheckoutResult> {
  const client = new x402Client((_version, accepts) => {
    const onChain = accepts.find((a) => a.network === `eip155:${chainId}`);
    return onChain ?? accepts[0]!;
  }).setSpendControls({ maxAmountPerPayment: `$${priceUsd}` });
  registerExactEvmScheme(client, { signer });
  const paidFetch = wrapFetchWithPayment(fetch, client);
  let res: Response;
  try {
    res = await paidFetch("/api/billing/checkout", {
      method: "POST",
      credentials: "same-origin",
      headers: {
        accept: "application/json",
        "content-type": "application/json",
        "x-csrf-token": currentCsrfToken(),
      },
      body: JSON.stringify(order),
    });
  } catch (e) {
    throw new Error(`The payment was not made: ${(e as Error).message}`);
  }
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (res.status !== 200 && res.status !== 202) {
    throw new ApiError(
      res.status,
      String(body["error"] ?? "error"),
      String(body["message"] ?? `HTTP ${res.status}`),
    );
  }
  return { status: res.status, body };
}
