/**
 * `x402_rpc_reachable` on a scrape alone: nothing asks /ready (a load
 * balancer that does not poll it), yet each scrape shows the networks as
 * the probe finds them now, not as they were at the last /ready.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Registry } from "prom-client";
import { openMigratedDb, type OpenedDb } from "../../storage/db.js";
import { createLogger } from "../../lib/logger.js";
import { serviceReadiness } from "./readiness.js";

let database: OpenedDb;
before(async () => {
  database = await openMigratedDb({ dataDir: "memory://" });
});
after(() => database.close());

test("a scrape probes the networks itself and shows what it found", async () => {
  const registry = new Registry();
  let baseUp = true;
  let probes = 0;
  serviceReadiness({
    db: database.db,
    networks: async () => {
      probes++;
      return [
        { network: "eip155:8453", reachable: baseUp },
        { network: "eip155:84532", reachable: true },
      ];
    },
    redis: undefined,
    metrics: { registry },
    log: createLogger("silent"),
  });
  assert.equal(probes, 0, "nothing probes before a scrape");
  const first = await registry.metrics();
  assert.match(first, /x402_rpc_reachable\{network="eip155:8453"\} 1\n/);
  assert.match(first, /x402_rpc_reachable\{network="eip155:84532"\} 1\n/);
  assert.equal(probes, 1);

  baseUp = false;
  // A probe is reused for a second; scrape until a fresh one answers.
  const deadline = Date.now() + 30_000;
  let text = first;
  while (!/x402_rpc_reachable\{network="eip155:8453"\} 0\n/.test(text)) {
    assert.ok(Date.now() < deadline, `the scrape never showed the outage:\n${text}`);
    await new Promise((r) => setTimeout(r, 100));
    text = await registry.metrics();
  }
  assert.match(text, /x402_rpc_reachable\{network="eip155:84532"\} 1\n/, "the other stays up");
  assert.ok(probes >= 2);
});
