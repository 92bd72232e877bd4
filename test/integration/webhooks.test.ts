/**
 * Settlement webhooks end to end: real settles on a devnet, a real receiver
 * on 127.0.0.1 that verifies every delivery with the `standardwebhooks`
 * package, the transactional outbox, retries while the receiver is down,
 * per-account order, the delivery log and the SSRF guard at delivery time.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { Webhook } from "standardwebhooks";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { availableBackends } from "../support/database.js";
import {
  setWebhookEndpoint,
  listWebhookDeliveries,
} from "../../src/features/webhooks/webhookRepository.js";
import { WebhookDeliveryWorker } from "../../src/workers/webhookDelivery.js";
import type { SettlementEvent } from "../../src/features/webhooks/events.js";
import { createLogger } from "../../src/lib/logger.js";

const PAY_TO = "0x4444444444444444444444444444444444444444" as Hex;

type Mode = "ok" | "500" | "hang";

/** A webhook receiver that verifies signatures; it can go down and come back. */
class Receiver {
  server: http.Server | undefined;
  port = 0;
  mode: Mode = "ok";
  secret = "";
  /** Events answered 2xx, in arrival order. */
  accepted: SettlementEvent[] = [];
  requests = 0;
  badSignatures = 0;

  async up(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.requests++;
        const body = Buffer.concat(chunks).toString("utf8");
        let event: SettlementEvent;
        try {
          event = new Webhook(this.secret).verify(body, {
            "webhook-id": String(req.headers["webhook-id"]),
            "webhook-timestamp": String(req.headers["webhook-timestamp"]),
            "webhook-signature": String(req.headers["webhook-signature"]),
          }) as SettlementEvent;
        } catch {
          this.badSignatures++;
          res.writeHead(400).end();
          return;
        }
        assert.equal(req.headers["webhook-id"], event.id);
        if (this.mode === "hang") return; // never answers
        if (this.mode === "500") {
          res.writeHead(500).end("try later");
          return;
        }
        this.accepted.push(event);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, "127.0.0.1", resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async down(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  get url() {
    return `http://127.0.0.1:${this.port}/hooks`;
  }
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const backend of availableBackends()) {
  describe(`webhooks (${backend})`, () => {
    let stack: TestStack;
    const receiver = new Receiver();

    before(async () => {
      stack = await startStack({ backend, env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" } });
      await receiver.up();
      const endpoint = await setWebhookEndpoint(stack.service.db, stack.accountId, receiver.url, {
        allowPrivateTargets: true,
      });
      assert.match(endpoint.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      receiver.secret = endpoint.secret;
    });
    after(async () => {
      await receiver.down();
      await stack.stop();
    });

    const settle = async (payerKey: Hex, amount?: string) => {
      const requirements = requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: PAY_TO,
        ...(amount ? { amount } : {}),
      });
      const body = {
        x402Version: 2,
        paymentPayload: await signPayment(payerKey, requirements),
        paymentRequirements: requirements,
      };
      const res = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as {
        success: boolean;
        transaction: string;
        errorReason?: string;
      };
      return { body, res };
    };

    test("a successful and a failed settle each produce a signed event with the record", async () => {
      const payerKey = stack.payerKeys[0]!;
      const payer = privateKeyToAccount(payerKey).address.toLowerCase();
      const { res: ok } = await settle(payerKey);
      assert.equal(ok.success, true);
      // A payment for more than the payer holds fails.
      const { res: again } = await settle(payerKey, "1000000000000000");
      assert.equal(again.success, false);

      // Outbox: one event per finished settlement, written with it.
      const rows = await stack.service.db
        .selectFrom("settlements as s")
        .innerJoin("webhook_events as e", "e.settlement_id", "s.id")
        .select(["s.id", "s.status", "e.type", "e.id as eventId", "e.seq"])
        .orderBy("e.seq")
        .execute();
      assert.deepEqual(
        rows.map((r) => [r.status, r.type]),
        [
          ["succeeded", "settlement.succeeded"],
          ["failed", "settlement.failed"],
        ],
      );

      // Delivered by the service's own worker.
      const events = await waitFor("both events", async () =>
        receiver.accepted.length >= 2 ? receiver.accepted : undefined,
      );
      assert.equal(receiver.badSignatures, 0);
      const [succeeded, failed] = events;
      assert.equal(succeeded!.type, "settlement.succeeded");
      assert.equal(succeeded!.id, rows[0]!.eventId);
      assert.ok(!Number.isNaN(Date.parse(succeeded!.createdAt)));
      const d = succeeded!.data;
      assert.equal(d.id, rows[0]!.id);
      assert.equal(d.network, stack.network);
      assert.equal(d.scheme, "exact");
      assert.equal(d.payer, payer);
      assert.equal(d.payTo, PAY_TO.toLowerCase());
      assert.equal(d.asset, stack.usdc.toLowerCase());
      assert.equal(d.amount, "10000");
      assert.equal(d.transaction, ok.transaction);
      assert.equal(d.status, "succeeded");
      assert.equal(d.errorReason, null);
      assert.equal(d.apiKeyName, "test");
      assert.ok(Date.parse(d.startedAt) <= Date.parse(d.finishedAt!));

      assert.equal(failed!.type, "settlement.failed");
      assert.equal(failed!.data.status, "failed");
      assert.equal(failed!.data.errorReason, again.errorReason);
      assert.equal(failed!.data.transaction, null);
      assert.equal(failed!.data.id, rows[1]!.id);

      // The receiver sees the request before the worker writes its log row.
      let log = await listWebhookDeliveries(stack.service.db, stack.accountId);
      for (let i = 0; i < 100 && log.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 50));
        log = await listWebhookDeliveries(stack.service.db, stack.accountId);
      }
      assert.equal(log.length, 2);
      for (const entry of log) {
        assert.equal(entry.statusCode, 204);
        assert.equal(entry.attempt, 1);
        assert.equal(entry.nextRetryAt, null);
        assert.ok(entry.latencyMs >= 0);
      }
    });

    test("a receiver that is down and comes back gets every event, in order", async () => {
      // Swap the service's worker for one with a fast back-off.
      await stack.service.workers.webhooks.stop();
      const worker = new WebhookDeliveryWorker({
        db: stack.service.db,
        log: createLogger("silent"),
        allowPrivateTargets: true,
        pollIntervalMs: 50,
        backoffBaseMs: 100,
        backoffMaxMs: 400,
        maxAttempts: 100,
        timeoutMs: 2_000,
      });
      worker.start();
      try {
        receiver.accepted = [];
        await receiver.down(); // connection refused
        const firstSeq = (
          await stack.service.db
            .selectFrom("webhook_events")
            .select(({ fn }) => fn.max("seq").as("m"))
            .executeTakeFirstOrThrow()
        ).m;
        for (let i = 0; i < 3; i++)
          assert.equal((await settle(stack.payerKeys[1]!)).res.success, true);
        await waitFor("refused attempts", async () => {
          const log = await listWebhookDeliveries(stack.service.db, stack.accountId);
          return log.filter((l) => l.statusCode === null).length >= 2 ? true : undefined;
        });
        // Only the oldest event of the account was attempted while it was down.
        const attempted = await stack.service.db
          .selectFrom("webhook_events")
          .select(["id", "attempts"])
          .where("seq", ">", String(firstSeq))
          .orderBy("seq")
          .execute();
        assert.equal(attempted.length, 3);
        assert.ok(attempted[0]!.attempts >= 2);
        assert.equal(attempted[1]!.attempts, 0);
        assert.equal(attempted[2]!.attempts, 0);

        // Back, but failing with 500 for a while.
        receiver.mode = "500";
        await receiver.up();
        await waitFor("500 attempts", async () => {
          const log = await listWebhookDeliveries(stack.service.db, stack.accountId);
          return log.filter((l) => l.statusCode === 500).length >= 2 ? true : undefined;
        });
        receiver.mode = "ok";
        const got = await waitFor("all three events", async () =>
          receiver.accepted.length >= 3 ? receiver.accepted : undefined,
        );
        assert.deepEqual(
          got.map((e) => e.id),
          attempted.map((e) => e.id),
          "each event once, in the order written",
        );
        assert.equal(receiver.badSignatures, 0);

        const log = await listWebhookDeliveries(stack.service.db, stack.accountId, 500);
        const first = log.filter((l) => l.eventId === attempted[0]!.id).reverse();
        assert.equal(first[0]!.attempt, 1);
        assert.match(first[0]!.error ?? "", /ECONNREFUSED/);
        assert.ok(first[0]!.nextRetryAt, "a failed attempt records its next retry");
        assert.ok(first.some((l) => l.statusCode === 500 && l.error === "HTTP 500"));
        const last = first.at(-1)!;
        assert.equal(last.statusCode, 204);
        assert.equal(last.nextRetryAt, null);
        assert.deepEqual(
          first.map((l) => l.attempt),
          first.map((_, i) => i + 1),
        );
        // The receiver has the last event before the worker records it as
        // delivered, so wait for the rows rather than read them once.
        await waitFor("every event marked delivered", async () => {
          const statuses = await stack.service.db
            .selectFrom("webhook_events")
            .select("status")
            .where("seq", ">", String(firstSeq))
            .execute();
          return statuses.length === 3 && statuses.every((s) => s.status === "delivered")
            ? true
            : undefined;
        });
      } finally {
        await worker.stop();
      }
    });

    test("delivery refuses a loopback target when private targets are not allowed", async () => {
      const worker = new WebhookDeliveryWorker({
        db: stack.service.db,
        log: createLogger("silent"),
        allowPrivateTargets: false,
        backoffBaseMs: 60_000,
        timeoutMs: 2_000,
      });
      const requestsBefore = receiver.requests;
      for (const url of [receiver.url, `http://localhost:${receiver.port}/hooks`]) {
        await stack.service.db
          .updateTable("webhook_endpoints")
          .set({ url })
          .where("account_id", "=", stack.accountId)
          .execute();
        assert.equal((await settle(stack.payerKeys[2]!)).res.success, true);
        assert.equal(await worker.runOnce(), 1);
        const [entry] = await listWebhookDeliveries(stack.service.db, stack.accountId, 1);
        assert.equal(entry!.statusCode, null);
        assert.match(entry!.error ?? "", /refused|may not reach/);
        assert.ok(entry!.nextRetryAt);
        // Give the refused event up so the next one is at the head.
        await stack.service.db
          .updateTable("webhook_events")
          .set({ status: "failed" })
          .where("id", "=", entry!.eventId)
          .execute();
      }
      assert.equal(receiver.requests, requestsBefore, "nothing reached the receiver");
      await assert.rejects(
        setWebhookEndpoint(stack.service.db, stack.accountId, "http://10.0.0.8/hook", {
          allowPrivateTargets: false,
        }),
        /private/,
      );
    });

    test("a receiver that never answers does not delay /settle; the attempt times out", async () => {
      await stack.service.db
        .updateTable("webhook_endpoints")
        .set({ url: receiver.url })
        .where("account_id", "=", stack.accountId)
        .execute();
      receiver.mode = "hang";
      const worker = new WebhookDeliveryWorker({
        db: stack.service.db,
        log: createLogger("silent"),
        allowPrivateTargets: true,
        pollIntervalMs: 20,
        backoffBaseMs: 60_000,
        timeoutMs: 1_500,
      });
      worker.start();
      try {
        const requestsBefore = receiver.requests;
        assert.equal((await settle(stack.payerKeys[3]!)).res.success, true);
        await waitFor("the hanging attempt", async () =>
          receiver.requests > requestsBefore ? true : undefined,
        );
        // While the receiver hangs, another settle answers at once.
        const t0 = Date.now();
        assert.equal((await settle(stack.payerKeys[3]!)).res.success, true);
        assert.ok(Date.now() - t0 < 1_500, `settle took ${Date.now() - t0} ms`);
        const entry = await waitFor("the timed-out attempt", async () => {
          const [e] = await listWebhookDeliveries(stack.service.db, stack.accountId, 1);
          return e && e.statusCode === null && /timed out|abort/i.test(e.error ?? "")
            ? e
            : undefined;
        });
        assert.ok(entry.latencyMs >= 1_400, `latency ${entry.latencyMs}`);
        assert.ok(entry.nextRetryAt);
      } finally {
        await worker.stop();
        receiver.mode = "ok";
      }
    });
  });
}
