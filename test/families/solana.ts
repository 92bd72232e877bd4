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
import {
  SOLANA_MAINNET,
  associatedTokenAccount,
  writeTokenAccount,
} from "../../devnet/svm/index.js";
import type { TestStack } from "../support/stack.js";
import { SendWatch, malformedString, usdcPrice, type FamilyAdapter } from "./adapter.js";

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
  payerRace: {
    signers: "fee payers",
    unit: "lamports",
    feeKnownBeforeSending: true,
    lostBeyondFee: 0n,
    // Room for one transaction in flight at its fee (the official client's:
    // two signatures and a 1-lamport priority fee, 10,001 lamports), not
    // for one more once a failure has cost its fee.
    budget: { env: { SVM_FAILED_FEE_BUDGET_SOL: "0.000015" }, native: 0.000015 },
    watchSends(stack) {
      const watch = new SendWatch();
      const ledger = stack.families.solana!.ledger;
      const send = ledger.send.bind(ledger);
      ledger.send = (wire) =>
        watch.take(
          () => send(wire),
          (o) => (o.ok && !o.duplicate ? o.signature : undefined),
        );
      return watch;
    },
    async signersBalance(stack) {
      const { ledger, info } = stack.families.solana!;
      const feePayers = await Promise.all(
        info.facilitatorSecretKeys.map(
          async (k) => (await createKeyPairSignerFromBytes(getBase58Encoder().encode(k))).address,
        ),
      );
      return feePayers.reduce((sum, a) => {
        const account = ledger.account(a);
        return sum + (account.exists ? BigInt(account.lamports) : 0n);
      }, 0n);
    },
    // Played by emptying its token account just before the ledger executes ours.
    async funds(stack, i) {
      const owner = address(await solana.payer(stack, i));
      const ata = await associatedTokenAccount(owner);
      const held = await solana.balanceOf(stack, owner);
      return {
        take: () => writeTokenAccount(stack.families.solana!.ledger, ata, owner, 0n),
        giveBack: () => writeTokenAccount(stack.families.solana!.ledger, ata, owner, held),
      };
    },
  },
};
