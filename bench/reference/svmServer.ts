/**
 * The Solana reference facilitator the benchmark compares against: a minimal
 * Express server built the way the official x402 Solana example builds one:
 * `x402Facilitator` with the official `ExactSvmScheme` over
 * `toFacilitatorSvmSigner`, one fee-payer key, default settings.
 *
 *   RPC_URL=… SECRET_KEY=<base58> PORT=4031 node dist/bench/reference/svmServer.js
 */
import express from "express";
import { x402Facilitator } from "@x402/core/facilitator";
import { ExactSvmScheme } from "@x402/svm/exact/facilitator";
import { toFacilitatorSvmSigner } from "@x402/svm";
import { createKeyPairSignerFromBytes, getBase58Encoder } from "@solana/kit";

const keypair = await createKeyPairSignerFromBytes(
  getBase58Encoder().encode(process.env["SECRET_KEY"]!),
);
const signer = toFacilitatorSvmSigner(keypair, { defaultRpcUrl: process.env["RPC_URL"]! });
const facilitator = new x402Facilitator().register(
  "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  new ExactSvmScheme(signer),
);

const app = express();
app.use(express.json());
app.post("/verify", async (req, res) => {
  try {
    res.json(await facilitator.verify(req.body.paymentPayload, req.body.paymentRequirements));
  } catch (e) {
    res.status(500).json({ error: (e as Error).message });
  }
});
app.post("/settle", async (req, res) => {
  try {
    res.json(await facilitator.settle(req.body.paymentPayload, req.body.paymentRequirements));
  } catch (e) {
    res.status(500).json({ error: (e as Error).message });
  }
});
app.get("/supported", (_req, res) => {
  res.json(facilitator.getSupported());
});
app.listen(Number(process.env["PORT"] ?? 4031), "127.0.0.1", () =>
  console.log("reference Solana facilitator ready"),
);
