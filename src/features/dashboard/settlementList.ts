/**
 * The Settlements tab: every attempt of one account, newest first, with
 * filters, search by payer or transaction (prefix, case-insensitive), and
 * keyset pagination on (started_at, id). A page costs one index range scan
 * whatever its depth (0013's settlements_account_page_idx), which is what
 * keeps it fast at millions of rows where OFFSET would not be.
 */
import { sql } from "kysely";
import type { Db } from "../../storage/db.js";
import type { SettlementStatus } from "../../storage/schema.js";
import { toTokenUnits, type AssetCatalog } from "./assets.js";

export interface SettlementFilters {
  id?: string | undefined;
  network?: string | undefined;
  scheme?: string | undefined;
  status?: SettlementStatus | undefined;
  keyId?: string | undefined;
  from?: Date | undefined;
  to?: Date | undefined;
  /** Payer or transaction prefix. */
  q?: string | undefined;
}

interface DashboardSettlement {
  id: string;
  apiKeyId: string;
  apiKeyName: string;
  network: string;
  scheme: string;
  payer: string | null;
  payTo: string;
  asset: string;
  assetSymbol: string | null;
  /** Atomic units, as recorded. */
  amount: string;
  /** Token units (e.g. "0.01" USDC), when the asset's decimals are known. */
  amountInUnits: string | null;
  transaction: string | null;
  explorerUrl: string | null;
  status: SettlementStatus;
  reason: string | null;
  message: string | null;
  startedAt: string;
  finishedAt: string | null;
  durationMs: number | null;
}

export interface SettlementPage {
  items: DashboardSettlement[];
  /** Pass back as `cursor` for the next (older) page; null at the end. */
  nextCursor: string | null;
}

export class InvalidCursorError extends Error {}

function encodeCursor(startedKey: string, id: string): string {
  return Buffer.from(JSON.stringify([startedKey, id])).toString("base64url");
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (
      Array.isArray(v) &&
      v.length === 2 &&
      typeof v[0] === "string" &&
      !Number.isNaN(Date.parse(v[0])) &&
      typeof v[1] === "string" &&
      /^[0-9a-f-]{36}$/i.test(v[1])
    )
      return [v[0], v[1]];
  } catch {
    // fall through
  }
  throw new InvalidCursorError("cursor is not one this service handed out; start from page one");
}

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

export async function listSettlements(
  db: Db,
  assets: AssetCatalog,
  accountId: string,
  filters: SettlementFilters,
  page: { cursor?: string | undefined; limit: number },
): Promise<SettlementPage> {
  let q = db
    .selectFrom("settlements as s")
    .innerJoin("api_keys as k", "k.id", "s.api_key_id")
    .select([
      "s.id",
      "s.api_key_id",
      "k.name as key_name",
      "s.network",
      "s.scheme",
      "s.payer",
      "s.pay_to",
      "s.asset",
      sql<string>`s.amount::text`.as("amount"),
      "s.transaction",
      "s.status",
      "s.error_reason",
      "s.error_message",
      "s.started_at",
      // Full precision (microseconds): the cursor must name the row exactly.
      sql<string>`s.started_at::text`.as("started_key"),
      "s.finished_at",
      "s.duration_ms",
    ])
    .where("s.account_id", "=", accountId);
  if (filters.id) q = q.where("s.id", "=", filters.id);
  if (filters.network) q = q.where("s.network", "=", filters.network);
  if (filters.scheme) q = q.where("s.scheme", "=", filters.scheme);
  if (filters.status) q = q.where("s.status", "=", filters.status);
  if (filters.keyId) q = q.where("s.api_key_id", "=", filters.keyId);
  if (filters.from) q = q.where("s.started_at", ">=", filters.from);
  if (filters.to) q = q.where("s.started_at", "<", filters.to);
  if (filters.q) {
    const prefix = `${escapeLike(filters.q.toLowerCase())}%`;
    q = q.where((eb) =>
      eb.or([
        eb(sql`lower(s.payer)`, "like", prefix),
        eb(sql`lower(s.transaction)`, "like", prefix),
      ]),
    );
  }
  if (page.cursor) {
    const [startedKey, id] = decodeCursor(page.cursor);
    q = q.where(sql<boolean>`(s.started_at, s.id) < (${startedKey}::timestamptz, ${id}::uuid)`);
  }
  const rows = await q
    .orderBy("s.started_at", "desc")
    .orderBy("s.id", "desc")
    .limit(page.limit + 1)
    .execute();
  const more = rows.length > page.limit;
  const shown = more ? rows.slice(0, page.limit) : rows;
  const last = shown[shown.length - 1];
  return {
    items: shown.map((r) => {
      const info = assets.describe(r.network, r.asset);
      return {
        id: r.id,
        apiKeyId: r.api_key_id,
        apiKeyName: r.key_name,
        network: r.network,
        scheme: r.scheme,
        payer: r.payer,
        payTo: r.pay_to,
        asset: r.asset,
        assetSymbol: info?.symbol ?? null,
        amount: r.amount,
        amountInUnits: info ? toTokenUnits(r.amount, info.decimals) : null,
        transaction: r.transaction,
        explorerUrl: assets.explorerUrl(r.network, r.transaction),
        status: r.status,
        reason: r.error_reason,
        message: r.error_message,
        startedAt: r.started_at.toISOString(),
        finishedAt: r.finished_at ? r.finished_at.toISOString() : null,
        durationMs: r.duration_ms,
      };
    }),
    nextCursor: more && last ? encodeCursor(last.started_key, last.id) : null,
  };
}

const CSV_COLUMNS: (keyof DashboardSettlement)[] = [
  "startedAt",
  "status",
  "reason",
  "network",
  "scheme",
  "apiKeyName",
  "payer",
  "payTo",
  "assetSymbol",
  "asset",
  "amountInUnits",
  "amount",
  "transaction",
  "explorerUrl",
  "id",
];

/**
 * One CSV field. Quoted when it holds a separator, quote or line break; a
 * leading = + - @ is defused so a spreadsheet does not run it as a formula.
 */
function csvField(v: unknown): string {
  if (v === null || v === undefined) return "";
  let s = String(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** The filtered settlements as CSV lines, page by page (at most `maxRows`). */
export async function* settlementsCsv(
  db: Db,
  assets: AssetCatalog,
  accountId: string,
  filters: SettlementFilters,
  maxRows = 100_000,
): AsyncGenerator<string> {
  yield `${CSV_COLUMNS.join(",")}\r\n`;
  let cursor: string | undefined;
  let sent = 0;
  while (sent < maxRows) {
    const page = await listSettlements(db, assets, accountId, filters, {
      cursor,
      limit: Math.min(1000, maxRows - sent),
    });
    if (page.items.length > 0)
      yield page.items
        .map((s) => CSV_COLUMNS.map((c) => csvField(s[c])).join(",") + "\r\n")
        .join("");
    sent += page.items.length;
    if (!page.nextCursor) return;
    cursor = page.nextCursor;
  }
}
