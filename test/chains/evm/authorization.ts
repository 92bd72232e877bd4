/**
 * Hand-built EIP-3009 authorizations, for cases the official client would
 * never produce (expired, not yet valid, wrong value). Signed with viem, the
 * same typed data the client signs.
 */
import { authorizationTypes } from "@x402/evm";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { toHex, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { randomBytes } from "node:crypto";

export interface AuthorizationFields {
  to: Hex;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce?: Hex;
}

export async function signAuthorization(
  payerKey: Hex,
  requirements: PaymentRequirements,
  fields: AuthorizationFields,
  chainId = 8453,
): Promise<PaymentPayload> {
  const account = privateKeyToAccount(payerKey);
  const nonce = fields.nonce ?? toHex(randomBytes(32));
  const authorization = {
    from: account.address,
    to: fields.to,
    value: fields.value,
    validAfter: fields.validAfter,
    validBefore: fields.validBefore,
    nonce,
  };
  const signature = await account.signTypedData({
    domain: {
      name: String(requirements.extra?.["name"] ?? "USD Coin"),
      version: String(requirements.extra?.["version"] ?? "2"),
      chainId,
      verifyingContract: requirements.asset as Hex,
    },
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: authorization,
  });
  return {
    x402Version: 2,
    accepted: requirements,
    payload: {
      signature,
      authorization: {
        from: account.address,
        to: fields.to,
        value: fields.value.toString(),
        validAfter: fields.validAfter.toString(),
        validBefore: fields.validBefore.toString(),
        nonce,
      },
    },
  } as PaymentPayload;
}

export const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));
