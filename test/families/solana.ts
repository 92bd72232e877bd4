/**
 * Solana `exact` with USDC, paid with the official `@x402/svm` client
 * scheme against the local ledger's RPC. A payment is a signed transaction
 * whose identity is its message: there is no nonce a second message could
 * reuse, so the suite's nonce test does not apply.
 */
import { x402Client } from "@x402/core/client";
import { ExactSvmScheme as ExactSvmClientScheme } from "@x402/svm/exact/client";
import { ExactSvmScheme as ExactSvmServerScheme } from "@x402/svm/exact/server";
import { address, createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { getTokenDecoder } from "@solana-program/token";
import { SOLANA_MAINNET, associatedTokenAccount } from "../../devnet/svm/index.js";
import type { TestStack } from "../support/stack.js";
import { malformedString, usdcPrice, type FamilyAdapter } from "./adapter.js";

const signer = (stack: TestStack, i: number) =>
  createKeyPairSignerFromBytes(
    getBase58Encoder().encode(stack.families.solana!.info.payerSecretKeys[i]!),
  );

export const solana: FamilyAdapter = {
  name: "Solana",
  network: SOLANA_MAINNET,
  namespace: "solana",
  stack: { families: { solana: {} } },
  sendCall: "sendTransaction",
  reasons: {
    replay: "duplicate_settlement",
    amount: "invalid_exact_svm_payload_amount_mismatch",
    payTo: "invalid_exact_svm_payload_recipient_mismatch",
  },
  // Wrapped SOL: a real mint, not one the service settles.
  unlistedAsset: "So11111111111111111111111111111111111111112",
  malformedPayloads: malformedString("transaction", "base64"),
  registerServer: (server) => server.register(SOLANA_MAINNET, new ExactSvmServerScheme()),
  // The devnet's payTo is the one address given a USDC token account: `exact` needs one.
  payTo: (stack) => stack.families.solana!.info.payTo,
  price: usdcPrice,
  client: async (stack, i) =>
    new x402Client().register(
      "solana:*",
      new ExactSvmClientScheme(await signer(stack, i), {
        rpcUrl: stack.families.solana!.info.rpcUrl,
      }),
    ),
  payer: async (stack, i) => (await signer(stack, i)).address,
  async balanceOf(stack, owner) {
    const account = stack.families.solana!.ledger.account(
      await associatedTokenAccount(address(owner)),
    );
    if (!account.exists) throw new Error(`${owner} has no USDC token account`);
    return getTokenDecoder().decode(account.data).amount;
  },
};
