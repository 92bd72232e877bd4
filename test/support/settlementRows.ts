/**
 * What a test reads back of a running stack's settlements: a row by id or
 * by transaction, the account's quota used, a settlement's webhook events,
 * and the row once the reorg watch has decided a taken-back success.
 */
import type { TestStack } from "./stack.js";
import { until } from "./processes.js";

export const rowById = (stack: TestStack, id: string) =>
  stack.service.db
    .selectFrom("settlements")
    .selectAll()
    .where("id", "=", id)
    .executeTakeFirstOrThrow();

export const rowOfTransaction = (stack: TestStack, transaction: string) =>
  stack.service.db
    .selectFrom("settlements")
    .selectAll()
    .where("transaction", "=", transaction)
    .executeTakeFirstOrThrow();

export const quotaUsed = async (stack: TestStack) =>
  (
    await stack.service.db
      .selectFrom("quota_usage")
      .select("used")
      .where("account_id", "=", stack.accountId)
      .executeTakeFirstOrThrow()
  ).used;

export const eventsOf = async (stack: TestStack, settlementId: string) =>
  (
    await stack.service.db
      .selectFrom("webhook_events")
      .select("type")
      .where("settlement_id", "=", settlementId)
      .orderBy("seq")
      .execute()
  ).map((e) => e.type);

/** The row once decided: naming another transaction than `tx`, or no longer a success. */
export const decidedRow = (stack: TestStack, id: string, tx: string) =>
  until(
    "the reorged success decided",
    async () => {
      const r = await rowById(stack, id);
      return (r.status !== "succeeded" || r.transaction !== tx) && r;
    },
    60_000,
  );
