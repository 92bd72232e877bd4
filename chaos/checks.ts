/**
 * The invariants a chaos run must end with, checked from the chains, the
 * database and the answers the resource servers were given, never from the
 * service's own view of itself. Each check returns how many things it
 * looked at and what broke; the run prints both and fails on any break.
 */
import { sql } from "kysely";
import type { Db } from "../src/storage/db.js";
import type { ChainAudit } from "./chains.js";
import type { History } from "./history.js";
import type { PaymentRecord } from "./traffic.js";
import type { WebhookReceiver } from "./webhookReceiver.js";

export interface InvariantResult {
  name: string;
  /** What was checked, e.g. "212 successes". */
  checked: string;
  violations: string[];
}

export interface CheckInputs {
  db: Db;
  history: History;
  payments: ReadonlyMap<string, PaymentRecord>;
  audits: readonly ChainAudit[];
  accountIds: readonly string[];
  webhooks: WebhookReceiver;
  outsideSends: ReadonlySet<string>;
  /** How long after it started a settlement may still be pending. */
  horizonMs: number;
  /** Per process: resident memory at start and at the end, bytes. */
  memory: { name: string; start: number | undefined; end: number | undefined }[];
  /** End RSS may be at most start × factor + slack. */
  memoryBound: { factor: number; slackBytes: number };
}

interface SettleSuccess {
  payment: string;
  text: string;
  transaction: string;
  /** The amount the answer says was settled, when it names one. */
  amount: string | undefined;
  paymentIdentifier: string | undefined;
}

function successes(history: History): SettleSuccess[] {
  return history.exchanges().flatMap(({ request, answer }) => {
    if (request.path !== "/settle" || !answer || answer.status !== 200) return [];
    let json: { success?: unknown; transaction?: unknown; amount?: unknown };
    try {
      json = JSON.parse(answer.text) as typeof json;
    } catch {
      return [];
    }
    if (json.success !== true) return [];
    return [
      {
        payment: request.payment ?? "(unknown payment)",
        text: answer.text,
        transaction: String(json.transaction),
        amount: json.amount === undefined ? undefined : String(json.amount),
        paymentIdentifier: request.paymentIdentifier,
      },
    ];
  });
}

const lower = (s: string) => (/^0x/i.test(s) ? s.toLowerCase() : s);

export async function checkInvariants(inp: CheckInputs): Promise<InvariantResult[]> {
  const results: InvariantResult[] = [];
  const audits = new Map(inp.audits.map((a) => [a.network, a]));
  const auditsByName = new Map(inp.audits.map((a) => [a.name, a]));
  const all = successes(inp.history);
  const byPayment = new Map<string, SettleSuccess[]>();
  for (const s of all) byPayment.set(s.payment, [...(byPayment.get(s.payment) ?? []), s]);

  // 1. Every success answered is exactly one transfer of what was settled,
  // still on the canonical chain. An `upto` answer names the amount
  // settled: it must be the one asked, and the one that moved (never the
  // maximum signed). A success a reorg took back may have landed again in
  // another transaction of the same settlement (its call re-sent at a new
  // nonce): the journal links the answered one to it, and that one is
  // checked as strictly.
  {
    const violations: string[] = [];
    let upto = 0;
    let relanded = 0;
    for (const [payment, answers] of byPayment) {
      const record = inp.payments.get(payment);
      const audit = record && auditsByName.get(record.family);
      if (!record || !audit) {
        violations.push(`${payment}: answered success, but the run never made this payment`);
        continue;
      }
      if (record.maximum !== undefined) upto++;
      for (const a of answers) {
        if (record.maximum !== undefined && a.amount === undefined) {
          violations.push(`${payment}: an upto success that names no amount settled: ${a.text}`);
        } else if (a.amount !== undefined && a.amount !== record.amount.toString()) {
          violations.push(
            `${payment}: answered ${a.amount} settled, the payment asked ${record.amount}${
              record.maximum !== undefined ? ` (maximum ${record.maximum})` : ""
            }`,
          );
        }
      }
      for (const tx of new Set(answers.map((a) => a.transaction))) {
        const problem = await audit.transferProblem(tx, record);
        if (!problem) continue;
        const landed = await landedAgain(inp.db, tx);
        if (landed && !(await audit.transferProblem(landed, record))) {
          relanded++;
          continue;
        }
        violations.push(
          `${payment} (${tx}): ${problem}${landed ? `; its settlement now names ${landed}` : ""}`,
        );
      }
    }
    results.push({
      name: "every success:true is exactly one transfer of the exact amount (upto: the amount settled), asset and payTo on the canonical chain",
      checked: `${byPayment.size} payments answered success (${upto} upto; ${relanded} landed again in another transaction after a reorg)`,
      violations,
    });
  }

  // 2. One success per payment (a payment-identifier replay repeats the same body).
  {
    const violations: string[] = [];
    for (const [payment, answers] of byPayment) {
      if (answers.length === 1) continue;
      const verbatim =
        answers.every(
          (a) => a.paymentIdentifier && a.paymentIdentifier === answers[0]!.paymentIdentifier,
        ) && new Set(answers.map((a) => a.text)).size === 1;
      if (!verbatim) {
        violations.push(
          `${payment}: ${answers.length} success answers: ${answers.map((a) => a.text).join(" | ")}`,
        );
      }
    }
    results.push({
      name: "no payment got two success:true answers (payment-identifier replays aside)",
      checked: `${all.length} success answers for ${byPayment.size} payments`,
      violations,
    });
  }

  // 3. Every transaction our signers sent is journaled; every journaled one is accounted for.
  {
    const violations: string[] = [];
    const journal = await inp.db
      .selectFrom("settlement_transactions as t")
      .innerJoin("settlements as s", "s.id", "t.settlement_id")
      .select(["t.reference", "t.network", "s.status", "s.transaction", "s.id"])
      .execute();
    const journaled = new Set(journal.map((j) => lower(j.reference)));
    let sent = 0;
    for (const audit of inp.audits) {
      if (!audit.signerTransactions) continue;
      for (const tx of await audit.signerTransactions()) {
        sent++;
        if (!journaled.has(lower(tx)) && !inp.outsideSends.has(lower(tx))) {
          violations.push(`${audit.name}: ${tx} was sent by our signer but is not journaled`);
        }
      }
    }
    for (const j of journal) {
      const audit = audits.get(j.network);
      if (!audit) continue;
      if (await audit.holds(j.reference)) continue;
      // Not on the chain: fine only if its settlement ended without it.
      if (j.status === "pending") {
        violations.push(
          `${j.reference}: journaled, not on the chain, settlement ${j.id} still pending`,
        );
      } else if (
        j.status === "succeeded" &&
        j.transaction &&
        lower(j.transaction) === lower(j.reference)
      ) {
        violations.push(
          `${j.reference}: settlement ${j.id} succeeded with it, but the chain does not hold it`,
        );
      }
    }
    results.push({
      name: "every transaction our signers sent is journaled, and every journaled one is accounted for",
      checked: `${sent} sent by our signers, ${journal.length} journaled`,
      violations,
    });
  }

  // 4a. No settlement left pending past the reconciler's horizon.
  {
    const cutoff = new Date(Date.now() - inp.horizonMs);
    const pending = await inp.db
      .selectFrom("settlements")
      .select(["id", "network", "started_at"])
      .where("status", "=", "pending")
      .execute();
    const stale = pending.filter((p) => new Date(p.started_at) < cutoff);
    results.push({
      name: `no settlement pending past the reconciler's horizon (${Math.round(inp.horizonMs / 1000)} s)`,
      checked: `${pending.length} pending at the end`,
      violations: stale.map(
        (p) => `${p.id} on ${p.network} pending since ${new Date(p.started_at).toISOString()}`,
      ),
    });
  }

  // 4b. No 5xx but a 503 with Retry-After.
  {
    const violations: string[] = [];
    let answered = 0;
    for (const { id, request, answer } of inp.history.exchanges()) {
      if (!answer || answer.balancer) continue;
      answered++;
      if (answer.status >= 500 && !(answer.status === 503 && answer.retryAfter)) {
        violations.push(
          `request ${id} (${request.kind} ${request.path}): ${answer.status} ${answer.text.slice(0, 200)}`,
        );
      }
    }
    results.push({
      name: "no answer was a 5xx other than 503 with Retry-After",
      checked: `${answered} answers from the service`,
      violations,
    });
  }

  // 5a. Quota usage equals the successes charged. Units a killed process had
  // reserved stay reserved until the month ends (the ledger's documented
  // behaviour): counted and shown, not a violation.
  {
    const violations: string[] = [];
    let leaked = 0;
    for (const accountId of inp.accountIds) {
      const usage = await inp.db
        .selectFrom("quota_usage")
        .select([
          sql<number>`coalesce(sum(used), 0)`.as("used"),
          sql<number>`coalesce(sum(reserved), 0)`.as("reserved"),
        ])
        .where("account_id", "=", accountId)
        .executeTakeFirst();
      const charged = await inp.db
        .selectFrom("settlements")
        .select(sql<number>`coalesce(sum(units), 0)`.as("units"))
        .where("account_id", "=", accountId)
        .where("status", "=", "succeeded")
        .executeTakeFirst();
      const used = Number(usage?.used ?? 0);
      const units = Number(charged?.units ?? 0);
      leaked += Number(usage?.reserved ?? 0);
      if (used !== units) {
        violations.push(`account ${accountId}: used ${used}, successes charged ${units}`);
      }
    }
    results.push({
      name: "quota usage equals the successes charged",
      checked: `${inp.accountIds.length} accounts (${leaked} units left reserved by killed processes)`,
      violations,
    });
  }

  // 5b. Exactly one settlement.succeeded event per success reached the receiver.
  {
    const violations: string[] = [];
    const succeeded = await inp.db
      .selectFrom("settlements")
      .select("id")
      .where("status", "=", "succeeded")
      .execute();
    const ids = new Map<string, Set<string>>();
    for (const e of inp.webhooks.received) {
      if (e.type !== "settlement.succeeded" || !e.settlementId) continue;
      ids.set(e.settlementId, (ids.get(e.settlementId) ?? new Set()).add(e.id));
    }
    for (const s of succeeded) {
      const events = ids.get(s.id)?.size ?? 0;
      if (events !== 1) {
        const outbox = await inp.db
          .selectFrom("webhook_events")
          .select(["type", "status", "attempts"])
          .where("settlement_id", "=", s.id)
          .execute();
        violations.push(
          `settlement ${s.id}: ${events} distinct settlement.succeeded events received; outbox: ${JSON.stringify(outbox)}`,
        );
      }
    }
    const known = new Set(succeeded.map((s) => s.id));
    for (const id of ids.keys()) {
      if (!known.has(id)) violations.push(`settlement.succeeded for ${id}, which is not succeeded`);
    }
    if (inp.webhooks.badSignatures > 0)
      violations.push(`${inp.webhooks.badSignatures} deliveries with a bad signature`);
    results.push({
      name: "exactly one settlement.succeeded event per success reached the webhook receiver",
      checked: `${succeeded.length} successes, ${inp.webhooks.received.length} deliveries`,
      violations,
    });
  }

  // 5c. Each payTo's balance moved by the sum of the successes recorded, and
  // every recorded success was answered as one. The one exception: a payment
  // whose success was answered to a connection that died with its replica
  // (the service committed the answer; the client never read it). Only a
  // payment-identifier lets a client recover that answer: counted, not a
  // violation.
  {
    const violations: string[] = [];
    // What a success moved: the amount its answer named (`upto`), else the one asked.
    const rows = (
      await inp.db
        .selectFrom("settlements")
        .select(["network", "pay_to", "payer", "amount", "settled_amount"])
        .where("status", "=", "succeeded")
        .execute()
    ).map((r) => ({ ...r, amount: r.settled_amount ?? r.amount }));
    const lost = new Set<string>();
    for (const { request, answer } of inp.history.exchanges()) {
      if (request.payment && (!answer || answer.balancer)) lost.add(request.payment);
    }
    const answeredKeys = new Map<string, number>();
    const keyOf = (network: string, payer: string, amount: string) =>
      `${network} ${lower(payer)} ${amount}`;
    for (const p of byPayment.keys()) {
      const r = inp.payments.get(p);
      if (!r) continue;
      const k = keyOf(r.network, r.payer, r.amount.toString());
      answeredKeys.set(k, (answeredKeys.get(k) ?? 0) + 1);
    }
    const lostKeys = new Set(
      [...lost].flatMap((p) => {
        const r = inp.payments.get(p);
        return r && !byPayment.has(p) ? [keyOf(r.network, r.payer, r.amount.toString())] : [];
      }),
    );
    let unreadAnswers = 0;
    for (const audit of inp.audits) {
      const mine = rows.filter(
        (r) => r.network === audit.network && lower(r.pay_to) === lower(audit.payTo),
      );
      const recorded = mine.reduce((sum, r) => sum + BigInt(r.amount), 0n);
      const balance = (await audit.payToBalance()) - audit.payToStart;
      if (balance !== recorded) {
        violations.push(
          `${audit.name} ${audit.payTo}: received ${balance}, recorded successes ${recorded}`,
        );
      }
      for (const r of mine) {
        const k = keyOf(r.network, r.payer ?? "", String(r.amount));
        const n = answeredKeys.get(k) ?? 0;
        if (n > 0) answeredKeys.set(k, n - 1);
        else if (lostKeys.has(k)) unreadAnswers++;
        else {
          violations.push(
            `${audit.name}: ${r.payer} paid ${r.amount} (recorded succeeded) but no request was answered success`,
          );
        }
      }
    }
    results.push({
      name: "each payTo's balance equals the sum of the successes, each answered as one",
      checked: `${inp.audits.length} chains, ${rows.length} successes (${unreadAnswers} answered to a connection lost with its replica)`,
      violations,
    });
  }

  // 6. Blame on proof: no payer is ever refused for cooling unless a
  // transaction of its own failed on-chain by its own doing (a failed
  // settlement of that payer with a transaction, its cause the payer's),
  // and a payload naming a payer it was not signed by is refused with a
  // 4xx, whoever it names. The one other answer it may get is the outage's
  // 503 with Retry-After (the database restarting while the caller's key is
  // looked up, before the payload is read): it judges nothing and blames
  // nobody, and 4b checks its form.
  {
    const violations: string[] = [];
    let cooled = 0;
    let injections = 0;
    let outages = 0;
    const ownFailures = new Set(
      (
        await inp.db
          .selectFrom("settlements")
          .select("payer")
          .where("status", "=", "failed")
          .where("failure_cause", "=", "payer")
          .where("transaction", "is not", null)
          .execute()
      ).flatMap((r) => (r.payer ? [lower(r.payer)] : [])),
    );
    for (const { request, answer } of inp.history.exchanges()) {
      if (!answer) continue;
      if (request.kind === "blame-injection") {
        injections++;
        if (answer.status === 503 && answer.retryAfter) {
          outages++;
          continue;
        }
        if (answer.status < 400 || answer.status >= 500) {
          violations.push(
            `a payload naming another payer was answered ${answer.status}: ${answer.text.slice(0, 200)}`,
          );
        }
        continue;
      }
      let json: { errorReason?: unknown; invalidReason?: unknown; payer?: unknown };
      try {
        json = JSON.parse(answer.text) as typeof json;
      } catch {
        continue;
      }
      const reason = json.errorReason ?? json.invalidReason;
      if (reason !== "payer_failed_onchain_recently") continue;
      cooled++;
      const payer = typeof json.payer === "string" ? lower(json.payer) : undefined;
      if (!payer || !ownFailures.has(payer)) {
        violations.push(
          `${payer ?? "(no payer named)"} was refused as cooling without a failed transaction of its own doing`,
        );
      }
    }
    results.push({
      name: "no payer is refused unless a transaction of its own failed by its own doing",
      checked: `${cooled} cooling refusals, ${injections} payloads naming another payer (${outages} of them met an outage: 503 with Retry-After)`,
      violations,
    });
  }

  // 7. Memory.
  {
    const { factor, slackBytes } = inp.memoryBound;
    const violations = inp.memory.flatMap((m) =>
      m.start !== undefined && m.end !== undefined && m.end > m.start * factor + slackBytes
        ? [`${m.name}: ${mb(m.start)} at start, ${mb(m.end)} at the end`]
        : [],
    );
    results.push({
      name: `each process's RSS at the end is at most ${factor}× its start + ${mb(slackBytes)}`,
      checked: inp.memory.map((m) => `${m.name} ${mb(m.start)} → ${mb(m.end)}`).join(", "),
      violations,
    });
  }
  return results;
}

/**
 * The transaction a success now names, when it is not `transaction` and
 * `transaction` was journaled for that same settlement (re-sent after a reorg).
 */
async function landedAgain(db: Db, transaction: string): Promise<string | undefined> {
  const row = await db
    .selectFrom("settlement_transactions as t")
    .innerJoin("settlements as s", "s.id", "t.settlement_id")
    .select(["s.transaction", "s.status"])
    .where(sql<string>`lower(t.reference)`, "=", transaction.toLowerCase())
    .executeTakeFirst();
  if (!row || row.status !== "succeeded" || !row.transaction) return undefined;
  return lower(row.transaction) === lower(transaction) ? undefined : row.transaction;
}

function mb(bytes: number | undefined): string {
  return bytes === undefined ? "?" : `${Math.round(bytes / 1024 / 1024)} MB`;
}
