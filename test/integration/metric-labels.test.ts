/**
 * Metric labels stay a bounded set whatever clients send: the network label
 * is one of the networks this service serves or `other`, and the result and
 * outcome labels are known reasons or `other`. prom-client keeps every label
 * set it has seen for the life of the process, so a label taken from the
 * request would let any free key grow the service's memory (and every
 * scrape) without end.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentRequirements } from "@x402/core/types";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";

const PAY_TO = "0x5555555555555555555555555555555555555555";
const FLOODED = ["x402_verifications_total", "x402_settlements_total"];

describe("metric labels", () => {
  let stack: TestStack;
  let requirements: PaymentRequirements;
  let body: Record<string, unknown>;

  before(async () => {
    stack = await startStack();
    requirements = requirementsFor({ network: stack.network, usdc: stack.usdc, payTo: PAY_TO });
    body = {
      x402Version: 2,
      paymentPayload: await signPayment(stack.payerKeys[0]!, requirements),
      paymentRequirements: requirements,
    };
  });
  after(() => stack.stop());

  /** Label sets per metric, as the registry holds them. */
  async function series(): Promise<Map<string, Record<string, string | number>[]>> {
    const all = await stack.service.metrics.registry.getMetricsAsJSON();
    return new Map(
      all
        .filter((m) => FLOODED.includes(m.name))
        .map((m) => [
          m.name,
          (m.values as { labels: Record<string, string | number> }[]).map((v) => v.labels),
        ]),
    );
  }
  const count = async () => [...(await series()).values()].reduce((n, v) => n + v.length, 0);
  const exposedLines = async () =>
    (await (await fetch(`${stack.url}/metrics`)).text())
      .split("\n")
      .filter((l) => FLOODED.some((name) => l.startsWith(`${name}{`))).length;

  /** The request body for a network this service does not serve. */
  const bogus = (network: string, x402Version = 2) => ({
    ...body,
    x402Version,
    paymentRequirements: { ...requirements, network },
  });

  test("1,000 distinct unserved networks on /verify and /settle add no series", async () => {
    // One of each kind first, so the series a bogus request earns exist.
    const warmUp = [
      post(stack.url, "/verify", bogus("zzz:warmup"), stack.apiKey),
      post(stack.url, "/verify", bogus("zzz:warmup", 1), stack.apiKey),
      post(stack.url, "/settle", bogus("zzz:warmup"), stack.apiKey),
    ];
    for (const res of await Promise.all(warmUp)) assert.equal(res.status, 200);
    const before = await count();
    const linesBefore = await exposedLines();

    for (let i = 0; i < 1000; i += 50) {
      const batch = Array.from({ length: 50 }, (_, j) => {
        const n = i + j;
        // Every tenth on the wrong-version path, which labels before parsing.
        const path = n % 5 === 4 ? "/settle" : "/verify";
        return post(stack.url, path, bogus(`zzz:bogus${n}`, n % 10 === 3 ? 1 : 2), stack.apiKey);
      });
      for (const res of await Promise.all(batch)) assert.equal(res.status, 200);
    }

    const after = await count();
    console.log(`series of ${FLOODED.join(" and ")}: ${before} before, ${after} after`);
    assert.equal(after, before, "no new series");
    assert.equal(await exposedLines(), linesBefore, "GET /metrics is no longer");
    for (const [name, sets] of await series()) {
      for (const labels of sets) {
        assert.ok(
          labels["network"] === stack.network || labels["network"] === "other",
          `${name} network label ${String(labels["network"])}`,
        );
      }
    }
    // The requests were counted, under `other`.
    const verified = (await stack.service.metrics.registry.getSingleMetricAsString(
      "x402_verifications_total",
    )) as string;
    assert.match(verified, /network="other"/);
    assert.doesNotMatch(verified, /bogus/);
  });

  test("a served network keeps its own label, and a valid payment its result", async () => {
    const res = await post(stack.url, "/verify", body, stack.apiKey);
    assert.equal(((await res.json()) as { isValid: boolean }).isValid, true);
    const verified = await stack.service.metrics.registry.getSingleMetricAsString(
      "x402_verifications_total",
    );
    assert.match(verified, new RegExp(`network="${stack.network}",result="valid"\\} 1`));
  });
});
