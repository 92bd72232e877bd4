/**
 * A paid API in a dozen lines, using only the official x402 packages and
 * this facilitator. Reads the facilitator URL and API key from the devnet
 * file that `npm start` writes.
 *
 *   npm start                      # in one terminal
 *   npx tsx examples/paid-api.ts   # in another: GET http://127.0.0.1:4021/weather costs $0.001
 */
import { readFileSync } from "node:fs";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/server";

const devnet = JSON.parse(
  readFileSync(process.env["DEVNET_FILE"] ?? ".devnet/devnet.json", "utf8"),
) as {
  facilitatorUrl: string;
  apiKey: string;
};
const PAY_TO = process.env["PAY_TO"] ?? "0x000000000000000000000000000000000000dEaD";
const auth = { "X-API-Key": devnet.apiKey };

const facilitator = new HTTPFacilitatorClient({
  url: devnet.facilitatorUrl,
  createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: {} }),
});
const server = new x402ResourceServer(facilitator).register("eip155:8453", new ExactEvmScheme());

const app = express();
app.use(
  paymentMiddleware(
    {
      "GET /weather": {
        accepts: { scheme: "exact", price: "$0.001", network: "eip155:8453", payTo: PAY_TO },
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
app.listen(4021, "127.0.0.1", () =>
  console.log("paid API on http://127.0.0.1:4021/weather ($0.001 per call)"),
);
