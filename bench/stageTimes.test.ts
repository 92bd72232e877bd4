/**
 * The benchmark's "where a settle's time went" row, read from the service's
 * own histograms as prom-client writes them: means per stage over a phase, largest first
 * (the difference of two snapshots), with the transaction's phases shown
 * inside the mechanism, and nothing invented when nothing was timed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createMetrics } from "../src/lib/metrics.js";
import { parseHistograms, STAGE_HISTOGRAMS, timeByStage } from "./harness.js";

test("mean own time per stage over a phase, transaction phases inside the mechanism", async () => {
  const m = createMetrics(false);
  m.settleStage.observe({ stage: "intent" }, 0.5); // before the phase: left out
  const before = parseHistograms(await m.registry.metrics(), STAGE_HISTOGRAMS);
  for (const s of [0.01, 0.03]) m.settleStage.observe({ stage: "intent" }, s);
  for (const s of [0.9, 1.1]) m.settleStage.observe({ stage: "mechanism" }, s);
  m.settleStage.observe({ stage: "commit" }, 0.2);
  m.transactionPhase.observe({ network: "eip155:8453", phase: "inclusion" }, 0.7);
  m.httpDuration.observe({ route: "/settle", method: "POST", status: "200" }, 9);
  const after = parseHistograms(await m.registry.metrics(), STAGE_HISTOGRAMS);
  assert.equal(
    timeByStage(before, after),
    "mechanism 1000 · commit 200 · intent 20 (in the mechanism: inclusion 700)",
  );
  assert.equal(timeByStage(after, after), "–");
});
