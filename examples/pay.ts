/**
 * Pays for the example API with the official `@x402/fetch` client and a
 * funded devnet payer key from the devnet file.
 *
 *   npx tsx examples/pay.ts [url]
 */
import { readFileSync } from "node:fs";
import { wrapFetchWithPayment } from "@x402/fetch";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { privateKeyToAccount } from "viem/accounts";
import type { Hex } from "viem";

const devnet = JSON.parse(
  readFileSync(process.env["DEVNET_FILE"] ?? ".devnet/devnet.json", "utf8"),
) as {
  networks: Record<string, { payerPrivateKeys: Hex[] }>;
};
const payerKey = devnet.networks["eip155:8453"]?.payerPrivateKeys[0];
if (!payerKey) throw new Error("no eip155:8453 payer in the devnet file; is `npm start` running?");

const payer = privateKeyToAccount(payerKey);
const client = new x402Client().register("eip155:*", new ExactEvmScheme(payer));
const payingFetch = wrapFetchWithPayment(fetch, client);

const url = process.argv[2] ?? "http://127.0.0.1:4021/weather";
const res = await payingFetch(url);
console.log(`${res.status} ${await res.text()}`);
const receipt = new x402HTTPClient(client).getPaymentSettleResponse((name) =>
  res.headers.get(name),
);
console.log(`paid by ${payer.address}; transaction ${receipt.transaction} on ${receipt.network}`);
