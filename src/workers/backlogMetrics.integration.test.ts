/**
 * The backlog gauges read the shared database at scrape time: the webhook
 * outbox's pending events, and per network the settlements pending past
 * the reconciler's horizon with how long the oldest has been past it,
 * served networks with nothing stuck at 0.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { Registry } from "prom-client";
import { openMigratedDb, type OpenedDb } from "../storage/db.js";
import { createLogger } from "../lib/logger.js";
import { createAccount } from "../features/accounts/accounts.js";
import { createApiKey } from "../features/keys/apiKeys.js";
import { QuotaLedger } from "../features/plans/quotaLedger.js";
import { SettlementRecorder } from "../features/settlements/settlementRecorder.js";
import type { PaymentRequest } from "../protocol/index.js";
import { registerBacklogMetrics } from "./backlogMetrics.js";

const HORIZON_MS = 90_000;
const NOW = Date.parse("2026-11-27T12:00:00Z");

let database: OpenedDb;
let recorder: SettlementRecorder;
let principal: { accountId: string; keyId: string; keyName: string };
before(async () => {
  database = await openMigratedDb({ dataDir: "memory://" });
  const ledger = new QuotaLedger(database.db, { starterLimit: 99, proLimit: 99, maxLimit: 99 });
  recorder = new SettlementRecorder(database.db, createLogger("silent"), ledger);
  const account = await createAccount(database.db, "backlog");
  const key = await createApiKey(database.db, account.id, "backlog");
  principal = { accountId: account.id, keyId: key.id, keyName: key.name };
});
after(() => database.close());

/** A pending settlement on `network` that started `agoMs` before NOW. */
async function pendingSettlement(network: string, agoMs: number): Promise<void> {
  const request = {
    x402Version: 2,
    paymentPayload: { x402Version: 2, payload: { n: randomUUID() } },
    paymentRequirements: {
      scheme: "exact",
      network,
      asset: "0x2222222222222222222222222222222222222222",
      amount: "5",
      payTo: "0x3333333333333333333333333333333333333333",
    },
  } as unknown as PaymentRequest;
  const id = await recorder.begin({
    principal,
    request,
    authorizationKey: randomUUID(),
    payer: "0xabc",
    units: 1,
  });
  assert.ok(id);
  await sql`UPDATE settlements SET started_at = ${new Date(NOW - agoMs)} WHERE id = ${id}`.execute(
    database.db,
  );
}

async function outboxEvent(status: "pending" | "delivered" | "failed"): Promise<void> {
  await database.db
    .insertInto("webhook_events")
    .values({
      id: `evt_${randomUUID()}`,
      account_id: principal.accountId,
      type: "settlement.succeeded",
      payload: "{}",
      status,
    } as never)
    .execute();
}

/** `name{labels} value` lines of one scrape, as a map. */
async function scrape(registry: Registry): Promise<Map<string, number>> {
  const lines = (await registry.metrics()).split("\n").filter((l) => l && !l.startsWith("#"));
  return new Map(lines.map((l) => [l.slice(0, l.lastIndexOf(" ")), Number(l.split(" ").pop())]));
}

test("outbox and stuck settlements, as the database holds them at the scrape", async () => {
  const registry = new Registry();
  registerBacklogMetrics({
    ...{ db: database.db, reads: recorder.reads, registry, reconcileAfterMs: HORIZON_MS },
    networks: ["eip155:8453", "eip155:84532"],
    log: createLogger("silent"),
    now: () => NOW,
  });
  let seen = await scrape(registry);
  assert.equal(seen.get("x402_webhook_outbox_pending"), 0);
  assert.equal(seen.get('x402_settlements_past_horizon{network="eip155:8453"}'), 0);
  assert.equal(seen.get('x402_settlements_past_horizon_oldest_seconds{network="eip155:84532"}'), 0);

  await pendingSettlement("eip155:8453", 10_000); // inside the horizon: the reconciler's next
  await pendingSettlement("eip155:8453", HORIZON_MS + 60_000);
  await pendingSettlement("eip155:8453", HORIZON_MS + 600_000);
  await pendingSettlement("eip155:84532", 5_000);
  for (const status of ["pending", "pending", "pending", "delivered", "failed"] as const)
    await outboxEvent(status);

  seen = await scrape(registry);
  assert.equal(seen.get("x402_webhook_outbox_pending"), 3, "delivered and given up do not count");
  assert.equal(seen.get('x402_settlements_past_horizon{network="eip155:8453"}'), 2);
  assert.equal(
    seen.get('x402_settlements_past_horizon_oldest_seconds{network="eip155:8453"}'),
    600,
  );
  assert.equal(seen.get('x402_settlements_past_horizon{network="eip155:84532"}'), 0);

  // Finished rows leave the gauge at the next scrape.
  await sql`UPDATE settlements SET status = 'failed', finished_at = now() WHERE status = 'pending'`.execute(
    database.db,
  );
  seen = await scrape(registry);
  assert.equal(seen.get('x402_settlements_past_horizon{network="eip155:8453"}'), 0);
  assert.equal(seen.get('x402_settlements_past_horizon_oldest_seconds{network="eip155:8453"}'), 0);
});
