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

export const xrpl: FamilyAdapter = {
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
  // The payer pays its transaction's fee, in drops like the price.
  payerFee: async (stack, hash) =>
    BigInt(String(stack.families.xrpl!.ledger.transaction(hash)!.tx["Fee"])),
};
