/**
 * XRP Ledger `exact` paid in XRP, with this project's XRPL client scheme (no
 * official one is published). Balances are in drops. A payment is a signed
 * transaction identified by its hash: a copy of it is refused with
 * `duplicate_settlement`, while another transaction reusing a consumed
 * Sequence is refused by the ledger's sequence check as a payment of its
 * own, so the suite's nonce test does not apply.
 */
import { x402Client } from "@x402/core/client";
import { Wallet } from "xrpl";
import { XRPL_MAINNET } from "../../devnet/xrpl/index.js";
import { ExactXrplClientScheme } from "../../src/chains/xrpl/clients/exactClient.js";
import { ExactXrplServerScheme } from "../../src/chains/xrpl/clients/exactServer.js";
import type { TestStack } from "../support/stack.js";
import { malformedString, type FamilyAdapter } from "./adapter.js";

const wallet = (stack: TestStack, i: number) =>
  Wallet.fromSeed(stack.families.xrpl!.info.payerSeeds[i]!);

export const xrpl: FamilyAdapter<"xrpl"> = {
  name: "XRP Ledger",
  network: XRPL_MAINNET,
  namespace: "xrpl",
  stack: { families: { xrpl: {} } },
  sendCall: '"submit"',
  reasons: {
    replay: "duplicate_settlement",
    amount: "invalid_exact_xrpl_amount",
    payTo: "invalid_exact_xrpl_destination",
  },
  // An issued currency's code the service does not list.
  unlistedAsset: "EUR",
  malformedPayloads: malformedString("signedTxBlob", "hex"),
  registerServer: (server) => server.register(XRPL_MAINNET, new ExactXrplServerScheme()),
  payTo: (stack) => stack.families.xrpl!.info.payTo,
  price: (drops) => ({ amount: drops.toString(), asset: "XRP" }),
  client: async (stack, i) =>
    new x402Client()
      .register(
        "xrpl:*",
        new ExactXrplClientScheme(wallet(stack, i), { wsUrl: stack.families.xrpl!.info.wsUrl }),
      )
      // XRP is not a dollar: a payer allows it explicitly, capped in drops.
      .setSpendControls({
        allowedAssets: [{ network: XRPL_MAINNET, asset: "XRP", maxAmountPerPayment: "100000" }],
      }),
  payer: async (stack, i) => wallet(stack, i).classicAddress,
  balanceOf: async (stack, account) => stack.families.xrpl!.ledger.xrpBalance(account),
  // A Payment, validated, and the XRP it delivered.
  async transfersOf(stack, hash) {
    const record = stack.families.xrpl!.ledger.transaction(hash);
    if (!record) return undefined;
    if (record.ledgerIndex === undefined) return { failure: "not in a validated ledger" };
    const result = record.meta["TransactionResult"];
    if (result !== "tesSUCCESS")
      return { failure: `the transaction's result is ${String(result)}` };
    const delivered = record.meta["delivered_amount"];
    const payment = record.tx["TransactionType"] === "Payment" && typeof delivered === "string";
    return {
      transfers: payment
        ? [
            {
              from: String(record.tx["Account"]),
              to: String(record.tx["Destination"]),
              asset: "XRP",
              amount: BigInt(delivered),
            },
          ]
        : [],
    };
  },
  // The payer pays its transaction's fee, in drops like the price.
  payerFee: async (stack, hash) =>
    BigInt(String(stack.families.xrpl!.ledger.transaction(hash)!.tx["Fee"])),
};
