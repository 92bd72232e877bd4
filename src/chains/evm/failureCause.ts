/**
 * Who caused an EVM settlement that failed on-chain, read from the chain
 * right after the failure.
 *
 * The account that settles chose the requirements (network, asset, payTo,
 * amount); the payer chose its wallet and what it does with its funds. A
 * stranger's wallet must not use up a merchant's failure limit, and a
 * merchant's bad token must not get an honest payer refused everywhere, so
 * each failure is charged to one of them:
 * - the payer, when its address carries code (an ERC-1271 wallet or an
 *   EIP-7702 delegation: code that runs in our transaction and may behave
 *   on-chain unlike in our simulation), when the payment asked us to sponsor
 *   its approve, or when the payer itself moved what the payment needed (its
 *   balance fell below the amount, or its EIP-3009 nonce was used elsewhere);
 * - the requirements otherwise (a token that reverts, say).
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { erc20Abi, isAddress, parseAbi, type Hex, type PublicClient } from "viem";
import type { FailureCause } from "../ports.js";
import { evmPayerOf } from "./paymentIdentity.js";
import { ERC20_APPROVAL_KEY } from "./approvalSponsor.js";

const AUTHORIZATION_STATE = parseAbi([
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
]);

type Fields = Record<string, unknown>;

export async function evmFailureCause(
  client: PublicClient,
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): Promise<FailureCause> {
  const payer = evmPayerOf(payload);
  if (!payer || !isAddress(payer, { strict: false })) return "requirements";
  if (payload.extensions && ERC20_APPROVAL_KEY in payload.extensions) return "payer";
  const code = await client.getCode({ address: payer });
  if (code && code !== "0x") return "payer";
  const asset = requirements.asset as Hex;
  const balance = await client.readContract({
    address: asset,
    abi: erc20Abi,
    functionName: "balanceOf",
    args: [payer],
  });
  if (balance < BigInt(requirements.amount)) return "payer";
  const auth = (payload.payload as Fields)["authorization"] as Fields | undefined;
  const nonce = auth?.["nonce"];
  if (typeof nonce === "string" && /^0x[0-9a-fA-F]{64}$/.test(nonce)) {
    const used = await client
      .readContract({
        address: asset,
        abi: AUTHORIZATION_STATE,
        functionName: "authorizationState",
        args: [payer, nonce as Hex],
      })
      .catch(() => false);
    if (used) return "payer";
  }
  return "requirements";
}
