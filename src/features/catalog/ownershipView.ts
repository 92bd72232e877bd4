/**
 * The dashboard's Catalog tab: an account's entries with their state, its
 * claims on entries other accounts hold, the events that concern it (a
 * takeover is shown to both the account that gained the entry and the one
 * that lost it), its challenge token, and a request to check an entry soon.
 * Other accounts are never named: an event says "another account".
 */
import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import type { Db } from "../../storage/db.js";
import type { CatalogEntryState, CatalogProof } from "../../storage/schema.js";
import { MIN_CHECK_GAP_MS } from "./catalogRepository.js";
import { CHALLENGE_PATH } from "./resourceProbe.js";

/** Rows of each list in one answer at most (newest first). */
const MAX_ROWS = 200;
const MAX_EVENTS = 100;

interface OwnedEntry {
  resource: string;
  toolName: string;
  type: string;
  state: CatalogEntryState;
  /** Listed by /discovery/resources and /discovery/search (every state but stale). */
  listed: boolean;
  proof: CatalogProof | null;
  provenAt: string | null;
  last402At: string | null;
  lastCheckAt: string | null;
  lastCheckError: string | null;
  nextCheckAt: string;
  /** Other accounts claiming this entry. */
  claims: number;
}

interface ClaimView {
  resource: string;
  toolName: string;
  claimedAt: string;
  lastCheckAt: string | null;
  /**
   * `pending`: not checked since the claim; `not_proven`: the resource's 402
   * does not name a payTo this account settles to, nor does the origin
   * publish its challenge; `owner_holds`: proven, but not more strongly
   * than the holder (publish the challenge to take it over).
   */
  result: "pending" | "not_proven" | "owner_holds";
  nextCheckAt: string;
}

interface EventView {
  at: string;
  resource: string;
  toolName: string;
  kind: "proven" | "unproven" | "takeover" | "stale" | "listed_again";
  /** For a takeover: whether this account gained the entry or lost it. */
  role: "owner" | "gained" | "lost";
  detail: Record<string, unknown>;
}

export interface CatalogOverview {
  entries: OwnedEntry[];
  claims: ClaimView[];
  events: EventView[];
  challenge: { path: string; token: string | null };
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export class CatalogOwnership {
  constructor(
    private readonly db: Db,
    private readonly minCheckGapMs = MIN_CHECK_GAP_MS,
  ) {}

  async overview(accountId: string): Promise<CatalogOverview> {
    const entries = await sql<{
      resource: string;
      tool_name: string;
      type: string;
      state: CatalogEntryState;
      proof: CatalogProof | null;
      proven_at: Date | null;
      last_402_at: Date | null;
      last_check_at: Date | null;
      last_check_error: string | null;
      next_check_at: Date;
      claims: number;
    }>`
      SELECT r.resource, r.tool_name, r.type, r.state, r.proof, r.proven_at, r.last_402_at,
             r.last_check_at, r.last_check_error, r.next_check_at,
             (SELECT count(*)::int FROM catalog_claims c
               WHERE c.resource = r.resource AND c.tool_name = r.tool_name
                 AND c.account_id <> r.account_id) AS claims
        FROM catalog_resources r
       WHERE r.account_id = ${accountId}
       ORDER BY r.last_updated DESC, r.id DESC
       LIMIT ${MAX_ROWS}::int
    `.execute(this.db);
    const claims = await sql<{
      resource: string;
      tool_name: string;
      claimed_at: Date;
      last_check_at: Date | null;
      result: ClaimView["result"];
      next_check_at: Date;
    }>`
      SELECT c.resource, c.tool_name, c.claimed_at, c.last_check_at, c.result, r.next_check_at
        FROM catalog_claims c
        JOIN catalog_resources r ON r.resource = c.resource AND r.tool_name = c.tool_name
       WHERE c.account_id = ${accountId} AND r.account_id IS DISTINCT FROM c.account_id
       ORDER BY c.declared_at DESC
       LIMIT ${MAX_ROWS}::int
    `.execute(this.db);
    const events = await sql<{
      at: Date;
      resource: string;
      tool_name: string;
      kind: EventView["kind"];
      account_id: string | null;
      previous_account_id: string | null;
      detail: Record<string, unknown>;
    }>`
      SELECT at, resource, tool_name, kind, account_id, previous_account_id, detail
        FROM catalog_events
       WHERE id IN (
         (SELECT id FROM catalog_events WHERE account_id = ${accountId}
           ORDER BY id DESC LIMIT ${MAX_EVENTS}::int)
         UNION
         (SELECT id FROM catalog_events WHERE previous_account_id = ${accountId}
           ORDER BY id DESC LIMIT ${MAX_EVENTS}::int))
       ORDER BY id DESC
       LIMIT ${MAX_EVENTS}::int
    `.execute(this.db);
    const challenge = await this.db
      .selectFrom("catalog_challenges")
      .select("token")
      .where("account_id", "=", accountId)
      .executeTakeFirst();
    return {
      entries: entries.rows.map((r) => ({
        resource: r.resource,
        toolName: r.tool_name,
        type: r.type,
        state: r.state,
        listed: r.state !== "stale",
        proof: r.proof,
        provenAt: iso(r.proven_at),
        last402At: iso(r.last_402_at),
        lastCheckAt: iso(r.last_check_at),
        lastCheckError: r.last_check_error,
        nextCheckAt: r.next_check_at.toISOString(),
        claims: r.claims,
      })),
      claims: claims.rows.map((c) => ({
        resource: c.resource,
        toolName: c.tool_name,
        claimedAt: c.claimed_at.toISOString(),
        lastCheckAt: iso(c.last_check_at),
        result: c.result,
        nextCheckAt: c.next_check_at.toISOString(),
      })),
      events: events.rows.map((e) => ({
        at: e.at.toISOString(),
        resource: e.resource,
        toolName: e.tool_name,
        kind: e.kind,
        role: e.kind !== "takeover" ? "owner" : e.account_id === accountId ? "gained" : "lost",
        detail: e.detail,
      })),
      challenge: { path: CHALLENGE_PATH, token: challenge?.token ?? null },
    };
  }

  /** The account's challenge token, made on first use; the same one afterwards. */
  async challenge(accountId: string): Promise<{ path: string; token: string }> {
    const token = `x402-catalog-${randomBytes(24).toString("base64url")}`;
    await this.db
      .insertInto("catalog_challenges")
      .values({ account_id: accountId, token })
      .onConflict((oc) => oc.column("account_id").doNothing())
      .execute();
    const row = await this.db
      .selectFrom("catalog_challenges")
      .select("token")
      .where("account_id", "=", accountId)
      .executeTakeFirstOrThrow();
    return { path: CHALLENGE_PATH, token: row.token };
  }

  /**
   * Asks for a check of an entry the account holds or claims: now, or
   * `minCheckGapMs` after its last check, whichever is later. Undefined when
   * the account neither holds nor claims it.
   */
  async requestCheck(
    accountId: string,
    resource: string,
    toolName: string,
  ): Promise<{ nextCheckAt: string } | undefined> {
    const result = await sql<{ next_check_at: Date }>`
      UPDATE catalog_resources r
         SET next_check_at = LEAST(r.next_check_at,
               GREATEST(now(), coalesce(r.last_check_at
                 + ${this.minCheckGapMs}::int * interval '1 millisecond', now())))
       WHERE r.resource = ${resource} AND r.tool_name = ${toolName}
         AND (r.account_id = ${accountId}
              OR EXISTS (SELECT 1 FROM catalog_claims c
                          WHERE c.resource = r.resource AND c.tool_name = r.tool_name
                            AND c.account_id = ${accountId}))
      RETURNING r.next_check_at
    `.execute(this.db);
    const row = result.rows[0];
    return row ? { nextCheckAt: row.next_check_at.toISOString() } : undefined;
  }
}
