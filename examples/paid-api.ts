/**
 * A paid API: GET /weather costs $0.001, payable on each chain family the
 * devnet runs (USDC on Base, Solana, NEAR and Starknet; RLUSD on the XRP
 * Ledger). An Express server with the official `@x402/express` middleware
 * and `HTTPFacilitatorClient` pointed at this facilitator; each family's
 * server scheme turns the dollar price into its own requirements: the
 * official `@x402/evm` and `@x402/svm` ones, and this project's for NEAR,
 * the XRP Ledger and Starknet (no official ones are published). Reads the
 * facilitator URL, API key and each network's payTo from the devnet file.
 *
 *   npm start                                     # in one terminal
 *   npx tsx examples/paid-api.ts [--port 4021]    # in another
 *   npx tsx examples/pay.ts --network near        # and pay it (examples/pay.ts)
 */
import { parseArgs } from "node:util";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import type { SchemeNetworkServer } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { ExactSvmScheme } from "@x402/svm/exact/server";
import { ExactNearServerScheme } from "../src/chains/near/clients/exactServer.js";
import { ExactXrplServerScheme } from "../src/chains/xrpl/clients/exactServer.js";
import { ExactStarknetServerScheme } from "../src/chains/starknet/clients/exactServer.js";
import { NETWORKS, nameOf, readDevnet, type Family } from "./devnet.js";

const { values } = parseArgs({ options: { port: { type: "string", default: "4021" } } });
const devnet = readDevnet();

// Where each family's payments go: the devnet's funded merchant on each
// ledger (on Base, any address receives USDC).
const payTo = {
  eip155: () => "0x000000000000000000000000000000000000dEaD",
  solana: () => devnet.entry("solana").payTo,
  near: () => devnet.entry("near").payTo,
  xrpl: () => devnet.entry("xrpl").payTo,
  starknet: () => devnet.entry("starknet").payTo,
} satisfies Record<Family, () => string>;
const schemes = {
  eip155: () => new ExactEvmScheme(),
  solana: () => new ExactSvmScheme(),
  near: () => new ExactNearServerScheme(),
  xrpl: () => new ExactXrplServerScheme(),
  starknet: () => new ExactStarknetServerScheme(),
} satisfies Record<Family, () => SchemeNetworkServer>;

const auth = { "X-API-Key": devnet.apiKey };
const facilitator = new HTTPFacilitatorClient({
  url: devnet.facilitatorUrl,
  createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: {} }),
});
const server = new x402ResourceServer(facilitator);
for (const family of devnet.families) server.register(NETWORKS[family], schemes[family]());

const app = express();
app.use(
  paymentMiddleware(
    {
      "GET /weather": {
        // One option per family: the client pays with the one it can.
        accepts: devnet.families.map((family) => ({
          scheme: "exact",
          price: "$0.001",
          network: NETWORKS[family],
          payTo: payTo[family](),
        })),
        description: "Today's weather",
        mimeType: "application/json",
      },
    },
    server,
  ),
);
app.get("/weather", (_req, res) => {
  res.json({ forecast: "sunny", temperatureC: 21 });
});
const port = Number(values.port);
app.listen(port, "127.0.0.1", () => {
  console.log(`paid API on http://127.0.0.1:${port}/weather ($0.001 per call), payable on:`);
  for (const family of devnet.families) {
    console.log(`  ${nameOf(family).padEnd(9)} ${NETWORKS[family]}`);
  }
  console.log(`pay it: npx tsx examples/pay.ts --network ${devnet.families.map(nameOf).join("|")}`);
});
