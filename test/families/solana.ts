/**
 * Solana `exact` with USDC, paid with the official `@x402/svm` client
 * scheme against the local ledger's RPC. A payment is a signed transaction
 * whose identity is its message: there is no nonce a second message could
 * reuse, so the suite's nonce test does not apply.
 */
import { x402Client } from "@x402/core/client";
import { ExactSvmScheme as ExactSvmClientScheme } from "@x402/svm/exact/client";
import { ExactSvmScheme as ExactSvmServerScheme } from "@x402/svm/exact/server";
import {
  address,
  createKeyPairSignerFromBytes,
  getBase58Encoder,
  getCompiledTransactionMessageDecoder,
} from "@solana/kit";
import { getTokenDecoder } from "@solana-program/token";
import {
  SOLANA_MAINNET,
  associatedTokenAccount,
  writeTokenAccount,
} from "../../devnet/svm/index.js";
import type { SolanaLedger } from "../../devnet/svm/ledger.js";
import type { TestStack } from "../support/stack.js";
import {
  SendWatch,
  malformedString,
  usdcPrice,
  type FamilyAdapter,
  type LedgerTransfer,
} from "./adapter.js";

const signer = (stack: TestStack, i: number) =>
  createKeyPairSignerFromBytes(
    getBase58Encoder().encode(stack.families.solana!.info.payerSecretKeys[i]!),
  );

export const solana: FamilyAdapter<"solana"> = {
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
  async transfersOf(stack, signature) {
    const ledger = stack.families.solana!.ledger;
    const landed = ledger.transaction(signature);
    if (!landed) return undefined;
    if (landed.err) return { failure: `the transaction failed: ${JSON.stringify(landed.err)}` };
    return { transfers: splTransfers(ledger, landed.messageBytes) };
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

const SPL_TOKEN_PROGRAMS = new Set([
  "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
  "TokenzQdBNbLqP5VEhdkAS6EPFLC1PhnBqCXEpPxuEb",
]);
/** SPL Token's `TransferChecked` instruction: [source, mint, destination, authority]. */
const TRANSFER_CHECKED = 12;

/**
 * The SPL `TransferChecked`s of a landed message, from their authority to
 * the owner of the token account they credit (as the ledger holds it).
 */
function splTransfers(ledger: SolanaLedger, messageBytes: Uint8Array): LedgerTransfer[] {
  const message = getCompiledTransactionMessageDecoder().decode(messageBytes);
  const keys = message.staticAccounts.map(String);
  // Legacy and v0 messages (the ones x402 payers sign) list instructions so.
  const instructions =
    (
      message as {
        instructions?: {
          programAddressIndex: number;
          accountIndices?: number[];
          data?: Uint8Array;
        }[];
      }
    ).instructions ?? [];
  const ownerOf = (tokenAccount: string) => {
    const account = ledger.account(address(tokenAccount));
    return account.exists ? String(getTokenDecoder().decode(account.data).owner) : tokenAccount;
  };
  return instructions.flatMap((ix) => {
    const data = ix.data;
    const accounts = ix.accountIndices ?? [];
    if (!SPL_TOKEN_PROGRAMS.has(keys[ix.programAddressIndex]!) || !data) return [];
    if (data[0] !== TRANSFER_CHECKED || data.length < 10 || accounts.length < 4) return [];
    return [
      {
        from: keys[accounts[3]!]!,
        to: ownerOf(keys[accounts[2]!]!),
        asset: keys[accounts[1]!]!,
        amount: new DataView(data.buffer, data.byteOffset + 1, 8).getBigUint64(0, true),
      },
    ];
  });
}
