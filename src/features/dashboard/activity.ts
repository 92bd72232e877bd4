/**
 * The Overview and Metrics tabs: counts and volumes of one account's
 * settlements, computed in SQL (one grouped query each), never by loading rows.
 */
import { sql } from "kysely";
import type { Db } from "../../storage/db.js";
import { FAILURE_WINDOW_MS } from "../plans/reservationGuard.js";
import { planNamed } from "../plans/plans.js";
import { toTokenUnits, type AssetCatalog } from "./assets.js";

interface VolumeByAsset {
  network: string;
  asset: string;
  symbol: string | null;
  settlements: number;
  /** Atomic units. */
  amount: string;
  amountInUnits: string | null;
}

export interface Overview {
  today: { settlements: number; succeeded: number; failed: number };
  month: { settlements: number; succeeded: number; failed: number };
  /** Succeeded over finished (succeeded + failed) this month; null before any. */
  successRate: number | null;
  volumeThisMonth: VolumeByAsset[];
  latestFailures: {
    id: string;
    network: string;
    scheme: string;
    reason: string | null;
    message: string | null;
    at: string;
  }[];
  /**
   * The networks where this account's settlements failed on-chain (our gas
   * spent) in the last hour, as the quota ledger counts them for its
   * failure limit: at the limit, settles on the network answer 429
   * `too_many_failed_settlements` until `heldOffUntil`.
   */
  onChainFailures: OnChainFailures[];
}

interface OnChainFailures {
  network: string;
  /** Settlements that failed after a transaction was sent, in the last hour. */
  lastHour: number;
  /** The plan's limit per hour; null when settlements are not metered (no limit applies). */
  limit: number | null;
  /** When settles on the network resume (ISO); null while under the limit. */
  heldOffUntil: string | null;
}

/** On-chain failures an account may have per network and hour, or null when none applies. */
export type FailureLimits = Readonly<{ free: number; paid: number }> | null;

function startOfUtcDay(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}

function startOfUtcMonth(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

export async function readOverview(
  db: Db,
  assets: AssetCatalog,
  accountId: string,
  failureLimits: FailureLimits,
  now = new Date(),
): Promise<Overview> {
  const day = startOfUtcDay(now);
  const month = startOfUtcMonth(now);
  const [counts, volume, failures, onChainFailures] = await Promise.all([
    db
      .selectFrom("settlements")
      .select([
        sql<number>`count(*) filter (where started_at >= ${day})::int`.as("day_all"),
        sql<number>`count(*) filter (where started_at >= ${day} and status = 'succeeded')::int`.as(
          "day_ok",
        ),
        sql<number>`count(*) filter (where started_at >= ${day} and status = 'failed')::int`.as(
          "day_failed",
        ),
        sql<number>`count(*)::int`.as("month_all"),
        sql<number>`count(*) filter (where status = 'succeeded')::int`.as("month_ok"),
        sql<number>`count(*) filter (where status = 'failed')::int`.as("month_failed"),
      ])
      .where("account_id", "=", accountId)
      .where("started_at", ">=", month)
      .executeTakeFirstOrThrow(),
    db
      .selectFrom("settlements")
      .select([
        "network",
        "asset",
        sql<number>`count(*)::int`.as("n"),
        sql<string>`sum(amount)::text`.as("total"),
      ])
      .where("account_id", "=", accountId)
      .where("started_at", ">=", month)
      .where("status", "=", "succeeded")
      .groupBy(["network", "asset"])
      .orderBy("n", "desc")
      .execute(),
    db
      .selectFrom("settlements")
      .select(["id", "network", "scheme", "error_reason", "error_message", "started_at"])
      .where("account_id", "=", accountId)
      .where("status", "=", "failed")
      .orderBy("started_at", "desc")
      .limit(5)
      .execute(),
    readOnChainFailures(db, accountId, failureLimits, now),
  ]);
  const finished = counts.month_ok + counts.month_failed;
  return {
    today: { settlements: counts.day_all, succeeded: counts.day_ok, failed: counts.day_failed },
    month: {
      settlements: counts.month_all,
      succeeded: counts.month_ok,
      failed: counts.month_failed,
    },
    successRate: finished === 0 ? null : counts.month_ok / finished,
    volumeThisMonth: volume.map((v) => volumeEntry(assets, v.network, v.asset, v.n, v.total)),
    latestFailures: failures.map((f) => ({
      id: f.id,
      network: f.network,
      scheme: f.scheme,
      reason: f.error_reason,
      message: f.error_message,
      at: f.started_at.toISOString(),
    })),
    onChainFailures,
  };
}

/**
 * The quota ledger's failure rule, read for the dashboard: per network, the
 * settlements that failed after a transaction was sent and finished in the
 * last hour; at the plan's limit, settles resume when the limit-th most
 * recent of them is an hour old. One grouped read over the ledger's index.
 */
async function readOnChainFailures(
  db: Db,
  accountId: string,
  limits: FailureLimits,
  now: Date,
): Promise<OnChainFailures[]> {
  const since = new Date(now.getTime() - FAILURE_WINDOW_MS);
  // The limit-th most recent failure under each plan's limit (null: fewer).
  const nth = (n: number) =>
    sql<Date | null>`(array_agg(finished_at order by finished_at desc))[${n}::int]`;
  const [rows, account] = await Promise.all([
    db
      .selectFrom("settlements")
      .select([
        "network",
        sql<number>`count(*)::int`.as("n"),
        nth(limits?.free ?? 1).as("nth_free"),
        nth(limits?.paid ?? 1).as("nth_paid"),
      ])
      .where("account_id", "=", accountId)
      .where("status", "=", "failed")
      .where("transaction", "is not", null)
      .where("finished_at", ">", since)
      .groupBy("network")
      .orderBy("network")
      .execute(),
    db.selectFrom("accounts").select("plan").where("id", "=", accountId).executeTakeFirst(),
  ]);
  // As the ledger reads it: an unknown plan is held to the free plan's limit.
  const free = planNamed(account?.plan ?? "free") === "free";
  return rows.map((r) => {
    const limit = limits === null ? null : free ? limits.free : limits.paid;
    const last = free ? r.nth_free : r.nth_paid;
    const held = limit !== null && r.n >= limit && last !== null;
    return {
      network: r.network,
      lastHour: r.n,
      limit,
      heldOffUntil: held
        ? new Date(new Date(last).getTime() + FAILURE_WINDOW_MS).toISOString()
        : null,
    };
  });
}

function volumeEntry(
  assets: AssetCatalog,
  network: string,
  asset: string,
  n: number,
  total: string,
): VolumeByAsset {
  const info = assets.describe(network, asset);
  const whole = total.split(".")[0] ?? total;
  return {
    network,
    asset,
    symbol: info?.symbol ?? null,
    settlements: n,
    amount: total,
    amountInUnits: info && whole === total ? toTokenUnits(total, info.decimals) : null,
  };
}

export const METRIC_RANGES = {
  "24h": { spanMs: 24 * 3_600_000, bucketMs: 3_600_000 },
  "7d": { spanMs: 7 * 86_400_000, bucketMs: 6 * 3_600_000 },
  "30d": { spanMs: 30 * 86_400_000, bucketMs: 86_400_000 },
} as const;
export type MetricRange = keyof typeof METRIC_RANGES;

export interface MetricsSeries {
  range: MetricRange;
  bucketSeconds: number;
  /** Bucket starts (ISO), oldest first; every series below has one value per bucket. */
  buckets: string[];
  settlements: { succeeded: number[]; failed: number[] };
  byNetwork: { network: string; settlements: number[] }[];
  /** Succeeded volume per bucket in token units (a number, for charts), per asset. */
  volumeByAsset: { network: string; asset: string; symbol: string | null; amounts: number[] }[];
  /**
   * What the transactions our signers sent for this account's settlements
   * (started in the range) cost, per network, in the chain's native token.
   */
  gasSpent: GasSpent[];
}

interface GasSpent {
  network: string;
  /** The native token fees are paid in; null when not known here. */
  symbol: string | null;
  /** Transactions sent, including replacements. */
  transactions: number;
  /** Of them, how many reverted on-chain (their gas spent for nothing). */
  reverted: number;
  /** In the smallest native unit (wei, FRI); null when the chain reported no fee. */
  fee: string | null;
  feeInUnits: string | null;
}

export async function readMetrics(
  db: Db,
  assets: AssetCatalog,
  accountId: string,
  range: MetricRange,
  now = new Date(),
): Promise<MetricsSeries> {
  const { spanMs, bucketMs } = METRIC_RANGES[range];
  // Buckets align to whole bucket sizes since the epoch, so they are stable
  // between refreshes; the window covers the current (partial) bucket.
  const end = Math.floor(now.getTime() / bucketMs) * bucketMs + bucketMs;
  const start = end - spanMs;
  const count = spanMs / bucketMs;
  const [rows, gas] = await Promise.all([
    db
      .selectFrom("settlements")
      .select([
        sql<number>`floor(extract(epoch from started_at) * 1000 / ${bucketMs}::bigint)::bigint * ${bucketMs}::bigint`.as(
          "bucket",
        ),
        "network",
        "asset",
        "status",
        sql<number>`count(*)::int`.as("n"),
        sql<string>`coalesce(sum(amount), 0)::text`.as("total"),
      ])
      .where("account_id", "=", accountId)
      .where("started_at", ">=", new Date(start))
      .where("started_at", "<", new Date(end))
      .where("status", "in", ["succeeded", "failed"])
      .groupBy(["bucket", "network", "asset", "status"])
      .execute(),
    readGasSpent(db, accountId, new Date(start), new Date(end)),
  ]);
  const buckets = Array.from({ length: count }, (_, i) => new Date(start + i * bucketMs));
  const indexOf = (bucket: number | string) => Math.round((Number(bucket) - start) / bucketMs);
  const zeros = () => Array<number>(count).fill(0);
  const succeeded = zeros();
  const failed = zeros();
  const byNetwork = new Map<string, number[]>();
  const byAsset = new Map<string, { network: string; asset: string; amounts: number[] }>();
  for (const r of rows) {
    const i = indexOf(r.bucket);
    if (i < 0 || i >= count) continue;
    (r.status === "succeeded" ? succeeded : failed)[i]! += r.n;
    const net = byNetwork.get(r.network) ?? zeros();
    net[i]! += r.n;
    byNetwork.set(r.network, net);
    if (r.status === "succeeded") {
      const k = `${r.network}|${r.asset}`;
      const entry = byAsset.get(k) ?? { network: r.network, asset: r.asset, amounts: zeros() };
      const info = assets.describe(r.network, r.asset);
      entry.amounts[i]! += Number(r.total) / 10 ** (info?.decimals ?? 0);
      byAsset.set(k, entry);
    }
  }
  return {
    range,
    bucketSeconds: bucketMs / 1000,
    buckets: buckets.map((b) => b.toISOString()),
    settlements: { succeeded, failed },
    byNetwork: [...byNetwork].map(([network, settlements]) => ({ network, settlements })),
    volumeByAsset: [...byAsset.values()].map((v) => ({
      ...v,
      symbol: assets.describe(v.network, v.asset)?.symbol ?? null,
    })),
    gasSpent: gas.map((g) => {
      const native = assets.native(g.network);
      return {
        network: g.network,
        symbol: native?.symbol ?? null,
        transactions: g.transactions,
        reverted: g.reverted,
        fee: g.fee,
        feeInUnits: native && g.fee !== null ? toTokenUnits(g.fee, native.decimals) : null,
      };
    }),
  };
}

/** The account's settlement transactions in a window, per network: count, reverted, fees. */
function readGasSpent(db: Db, accountId: string, from: Date, to: Date) {
  return db
    .selectFrom("settlement_transactions as t")
    .innerJoin("settlements as s", "s.id", "t.settlement_id")
    .select([
      "s.network",
      sql<number>`count(*)::int`.as("transactions"),
      sql<number>`count(*) filter (where t.status = 'reverted')::int`.as("reverted"),
      // Null when no transaction's fee is known (families that do not report one).
      sql<string | null>`sum(t.fee)::text`.as("fee"),
    ])
    .where("s.account_id", "=", accountId)
    .where("s.started_at", ">=", from)
    .where("s.started_at", "<", to)
    .groupBy("s.network")
    .orderBy("s.network")
    .execute();
}
