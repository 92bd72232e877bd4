/**
 * Pays for the example API (examples/paid-api.ts) with the official
 * `@x402/fetch` client and a funded devnet payer of one chain family. Each
 * family is a client scheme registered on `x402Client`: the official
 * `@x402/evm` and `@x402/svm` ones, and this project's for NEAR, the XRP
 * Ledger and Starknet (no official ones are published). Prints what it paid
 * and the transaction.
 *
 *   npx tsx examples/pay.ts [--network base|solana|near|xrpl|starknet] [url]
 */
import { parseArgs } from "node:util";
import { wrapFetchWithPayment } from "@x402/fetch";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentRequirements, SchemeNetworkClient } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { ExactSvmScheme } from "@x402/svm/exact/client";
import { privateKeyToAccount } from "viem/accounts";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { Wallet } from "xrpl";
import { Account, RpcProvider } from "starknet";
import { ExactNearClientScheme } from "../src/chains/near/clients/exactClient.js";
import { ExactXrplClientScheme } from "../src/chains/xrpl/clients/exactClient.js";
import { ExactStarknetClientScheme } from "../src/chains/starknet/clients/exactClient.js";
import { NETWORKS, familyOf, readDevnet, type Family } from "./devnet.js";

const { values, positionals } = parseArgs({
  options: { network: { type: "string", default: "base" } },
  allowPositionals: true,
});
const family = familyOf(values.network);
const devnet = readDevnet();

interface Payer {
  address: string;
  scheme: SchemeNetworkClient;
  /** Whether `asset`'s amounts are decimal values (an XRPL issued currency), not atomic units of 6 decimals. */
  decimal?(asset: string): boolean;
}

/** Each family's payer: the devnet's first funded key, as that family's client scheme. */
const payers = {
  async eip155() {
    const account = privateKeyToAccount(devnet.entry("eip155").payerPrivateKeys[0]!);
    return { address: account.address, scheme: new ExactEvmScheme(account) };
  },
  async solana() {
    const { payerSecretKeys, rpcUrl } = devnet.entry("solana");
    const signer = await createKeyPairSignerFromBytes(
      getBase58Encoder().encode(payerSecretKeys[0]!),
    );
    // rpcUrl: the local ledger (by default the scheme would ask Solana's public node).
    return { address: signer.address, scheme: new ExactSvmScheme(signer, { rpcUrl }) };
  },
  async near() {
    const { payers, rpcUrl } = devnet.entry("near");
    const { accountId, secretKey } = payers[0]!;
    const key = KeyPair.fromString(secretKey as KeyPairString);
    return { address: accountId, scheme: new ExactNearClientScheme(accountId, key, { rpcUrl }) };
  },
  async xrpl() {
    const { payerSeeds, wsUrl } = devnet.entry("xrpl");
    const wallet = Wallet.fromSeed(payerSeeds[0]!);
    return {
      address: wallet.classicAddress,
      scheme: new ExactXrplClientScheme(wallet, { wsUrl }),
      decimal: (asset) => asset !== "XRP",
    };
  },
  async starknet() {
    const { payers, rpcUrl } = devnet.entry("starknet");
    const { address, privateKey } = payers[0]!;
    const provider = new RpcProvider({ nodeUrl: rpcUrl });
    const account = new Account({ provider, address, signer: privateKey, cairoVersion: "1" });
    return { address, scheme: new ExactStarknetClientScheme(account) };
  },
} satisfies Record<Family, () => Promise<Payer>>;

const payer: Payer = await payers[family]();
let paid: PaymentRequirements | undefined;
const client = new x402Client()
  .register(NETWORKS[family], payer.scheme)
  .onAfterPaymentCreation(async ({ selectedRequirements }) => {
    paid = selectedRequirements;
  });

const url = positionals[0] ?? "http://127.0.0.1:4021/weather";
const res = await wrapFetchWithPayment(fetch, client)(url);
console.log(`GET ${url}: ${res.status} ${await res.text()}`);
if (!res.ok || !paid) {
  console.error(res.headers.get("payment-required") ?? "no payment was made");
  process.exit(1);
}
const receipt = new x402HTTPClient(client).getPaymentSettleResponse((name) =>
  res.headers.get(name),
);
console.log(`paid ${amountOf(paid)} on ${receipt.network} from ${payer.address}`);
console.log(`transaction ${receipt.transaction}`);

/** The amount in the asset's units: atomic units of 6 decimals, or the payer's family's own decimal values. */
function amountOf(r: PaymentRequirements): string {
  const symbol = devnet.symbolOf(r.network, r.asset);
  const decimal = payer.decimal?.(r.asset) ?? false;
  const units = decimal ? r.amount : (Number(r.amount) / 1e6).toString();
  return `${units} ${symbol}${decimal ? "" : ` (${r.amount} atomic units)`}`;
}
