/**
 * The Solana reference facilitator the benchmark compares against: a minimal
 * Express server built the way the official x402 Solana example builds one:
 * `x402Facilitator` with the official `ExactSvmScheme` over
 * `toFacilitatorSvmSigner`, one fee-payer key, default settings.
 *
 *   RPC_URL=… SECRET_KEY=<base58> PORT=4031 node dist/bench/reference/svmServer.js
 */
import { x402Facilitator } from "@x402/core/facilitator";
import { serveFacilitator } from "./serve.js";
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

serveFacilitator(facilitator, Number(process.env["PORT"] ?? 4031), "reference Solana facilitator");
