/**
 * The XRPL bench's payers, on a thread of their own (see bench.ts): signs
 * the payments the bench asks for with this project's client scheme, over
 * its own connection to the local ledger. Loaded only by the benchmarks.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { PaymentRequirements } from "@x402/core/types";
import { Client, Wallet } from "xrpl";
import { ExactXrplClientScheme } from "../../src/chains/xrpl/clients/exactClient.js";

export interface SignerInput {
  wsUrl: string;
  payerSeeds: string[];
}

export type ToSigner = { id: number; payer: number; requirements: PaymentRequirements };

export type FromSigner =
  { id: number; payload: Record<string, unknown> } | { id: number; error: string };

const port = parentPort;
if (!port) throw new Error("benchSigner.ts runs only as a worker thread");
const input = workerData as SignerInput;

const client = new Client(input.wsUrl);
await client.connect();
// A wallet is derived from its seed only when its payer first signs.
const schemes = new Map<number, ExactXrplClientScheme>();
const schemeOf = (payer: number) => {
  let scheme = schemes.get(payer);
  if (!scheme) {
    scheme = new ExactXrplClientScheme(Wallet.fromSeed(input.payerSeeds[payer]!), { client });
    schemes.set(payer, scheme);
  }
  return scheme;
};

port.on("message", (message: ToSigner | "stop") => {
  if (message === "stop") {
    void client.disconnect().finally(() => port.close());
    return;
  }
  schemeOf(message.payer)
    .createPaymentPayload(2, message.requirements)
    .then(
      (partial) =>
        port.postMessage({ id: message.id, payload: partial.payload } satisfies FromSigner),
      (e: unknown) =>
        port.postMessage({
          id: message.id,
          error: e instanceof Error ? e.message : String(e),
        } satisfies FromSigner),
    );
});
port.postMessage("ready");
