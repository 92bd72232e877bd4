/**
 * The HTTP side both reference facilitators share: the three facilitator
 * routes over an `x402Facilitator`, on Express, as the official examples
 * serve them.
 */
import express from "express";
import type { x402Facilitator } from "@x402/core/facilitator";

export function serveFacilitator(facilitator: x402Facilitator, port: number, name: string): void {
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
  app.listen(port, "127.0.0.1", () => console.log(`${name} ready`));
  // The official examples handle no signal, and Node's default on SIGTERM
  // ends the process without its exit steps, so `--cpu-prof` (the benchmark
  // profiles both servers) would write nothing. Exiting from a handler is the
  // same stop, with the profile written; nothing measured changes.
  process.once("SIGTERM", () => process.exit(0));
}
