/**
 * Each recorded delivery attempt is reported with its outcome (the
 * `x402_webhook_deliveries_total` metric): a 2xx is `delivered`, a failure
 * with retries left `retrying`, an event with no endpoint left `given_up`.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { openMigratedDb, type OpenedDb } from "../storage/db.js";
import { createLogger } from "../lib/logger.js";
import { createAccount } from "../features/accounts/accounts.js";
import { setWebhookEndpoint } from "../features/webhooks/webhookRepository.js";
import { WebhookDeliveryWorker, type AttemptOutcome } from "./webhookDelivery.js";

let database: OpenedDb;
let receiver: http.Server;
let base: string;
before(async () => {
  database = await openMigratedDb({ dataDir: "memory://" });
  receiver = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(req.url === "/ok" ? 204 : 500).end());
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});
after(async () => {
  receiver.closeAllConnections();
  await new Promise((r) => receiver.close(r));
  await database.close();
});

async function accountWithEvent(path: string | undefined): Promise<void> {
  const account = await createAccount(database.db, `webhooks-${path ?? "none"}`);
  if (path)
    await setWebhookEndpoint(database.db, account.id, `${base}${path}`, {
      allowPrivateTargets: true,
    });
  await database.db
    .insertInto("webhook_events")
    .values({
      id: `evt_${randomUUID()}`,
      account_id: account.id,
      type: "settlement.succeeded",
      payload: "{}",
    } as never)
    .execute();
}

test("each recorded attempt is reported with its outcome", async () => {
  await accountWithEvent("/ok");
  await accountWithEvent("/down");
  await accountWithEvent(undefined);
  const outcomes: AttemptOutcome[] = [];
  const worker = new WebhookDeliveryWorker({
    db: database.db,
    log: createLogger("silent"),
    allowPrivateTargets: true,
    onAttempt: (outcome) => outcomes.push(outcome),
  });
  assert.equal(await worker.runOnce(), 3);
  assert.deepEqual(outcomes.sort(), ["delivered", "given_up", "retrying"]);
  const states = await database.db
    .selectFrom("webhook_events")
    .select("status")
    .orderBy("status")
    .execute();
  assert.deepEqual(
    states.map((s) => s.status),
    ["delivered", "failed", "pending"],
    "the outcomes reported are the ones recorded",
  );
});
