/**
 * A Solana payment signed as a real payer signs it: the official `@x402/svm`
 * client scheme with a devnet payer key, against the local ledger's RPC.
 */
import type { PaymentRequirements } from "@x402/core/types";
import { ExactSvmScheme } from "@x402/svm/exact/client";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { paymentRequest } from "../../chains/evm/payments.js";

export async function solanaPaymentRequest(
  ledger: { rpcUrl: string; payerSecretKeys: readonly string[] },
  payer: number,
  requirements: PaymentRequirements,
) {
  const signer = await createKeyPairSignerFromBytes(
    getBase58Encoder().encode(ledger.payerSecretKeys[payer]!),
  );
  const partial = await new ExactSvmScheme(signer, { rpcUrl: ledger.rpcUrl }).createPaymentPayload(
    2,
    requirements,
  );
  return paymentRequest(requirements, partial.payload);
}
