/**
 * Who owns a catalog entry, and whether it is still listed: decided in the
 * background (src/workers/catalogProofs.ts runs `runDue`), never on the
 * payment path. docs/discovery.md, "Who owns an entry", is the user's view.
 *
 * For each entry that is due, the checker fetches the resource as a client
 * without a payment would (resourceProbe.ts, through the webhooks' SSRF
 * guard) and reads the offers of its 402 answer. An account proves an entry
 * by either of:
 * - `pay_to`: the 402 names a (network, payTo) that one of the account's own
 *   succeeded settlements paid (its latest PROOF_SETTLEMENTS_SCANNED are
 *   searched). A /verify proves nothing: it is free and anyone may sign a
 *   payment to anyone;
 * - `challenge`: the account's challenge token is a line of
 *   /.well-known/x402-catalog on the resource's origin (only fetched when an
 *   account involved has a token). It is the stronger proof: it shows
 *   control of the origin, where a payTo can be paid by anyone.
 * A claimant (an account that declared an entry another account holds) whose
 * proof is stronger than the owner's takes the entry over: its declaration
 * replaces the entry's content, and the takeover is an event both accounts
 * see (catalog_events). Between equal proofs the owner keeps the entry.
 *
 * An HTTP entry whose resource has not answered 402 for STALE_AFTER_MS
 * (since its last 402, or since it was cataloged) becomes stale and leaves
 * the listing; the first 402 after that lists it again. An MCP entry is
 * priced inside a tool result, not by an HTTP 402: it is never fetched,
 * proves ownership only by challenge and never goes stale here.
 */
import { sql } from "kysely";
import type { Db } from "../../storage/db.js";
import type { CatalogEntryState, CatalogProof } from "../../storage/schema.js";
import type { Logger } from "../../lib/logger.js";
import { describeError } from "../../lib/errors.js";
import type { CatalogDraft } from "./declaration.js";
import { pgTextArray, searchVector } from "./catalogRepository.js";
import {
  PROOF_BATCH_SIZE,
  PROOF_MAX_BYTES,
  PROOF_MAX_CLAIMS,
  PROOF_RECHECK_MS,
  PROOF_RETRY_MS,
  PROOF_SETTLEMENTS_SCANNED,
  PROOF_TIMEOUT_MS,
  STALE_AFTER_MS,
} from "./limits.js";
import {
  fetchChallenges,
  probeResource,
  type ProbeOptions,
  type ProbeResult,
} from "./resourceProbe.js";

export interface OwnershipCheckerOptions {
  /** Devnet mode: resources on loopback and private addresses may be fetched. */
  allowPrivateTargets: boolean;
  log: Logger;
  recheckMs?: number;
  retryMs?: number;
  staleAfterMs?: number;
  timeoutMs?: number;
  maxBytes?: number;
  batchSize?: number;
  /** Told when the listing changed (a takeover, an entry stale or listed again). */
  onChange?: () => void;
}

/** What one check found and did. */
export interface CheckOutcome {
  resource: string;
  toolName: string;
  state: CatalogEntryState;
  ownerAccountId: string | null;
  proof: CatalogProof | null;
  /** Whether the resource answered 402 (undefined: not fetched, an MCP entry). */
  answered402: boolean | undefined;
  /** Set when the entry changed hands. */
  takeover?: { from: string | null; to: string; proof: CatalogProof };
  /** Why the resource's answer was not a 402. */
  error?: string;
}

interface EntryRow {
  id: string;
  resource: string;
  tool_name: string;
  type: "http" | "mcp";
  method: string | null;
  probe_url: string | null;
  account_id: string | null;
  state: CatalogEntryState;
  proof: CatalogProof | null;
  last_402_at: Date | null;
  cataloged_at: Date;
}

interface ClaimRow {
  account_id: string;
  draft: CatalogDraft;
  probe_url: string | null;
}

const ENTRY_COLUMNS = sql.raw(
  "id, resource, tool_name, type, method, probe_url, account_id, state, proof, last_402_at, cataloged_at",
);

const STRENGTH: Record<CatalogProof, number> = { pay_to: 1, challenge: 2 };
const strength = (p: CatalogProof | null) => (p === null ? 0 : STRENGTH[p]);

/** How long a claimed batch is the claiming replica's before another may check it. */
const LEASE_MS = 5 * 60_000;

export class OwnershipChecker {
  private readonly probe: ProbeOptions;
  private readonly recheckMs: number;
  private readonly retryMs: number;
  private readonly staleAfterMs: number;
  private readonly batchSize: number;

  constructor(
    private readonly db: Db,
    private readonly opts: OwnershipCheckerOptions,
  ) {
    this.probe = {
      allowPrivateTargets: opts.allowPrivateTargets,
      timeoutMs: opts.timeoutMs ?? PROOF_TIMEOUT_MS,
      maxBytes: opts.maxBytes ?? PROOF_MAX_BYTES,
    };
    this.recheckMs = opts.recheckMs ?? PROOF_RECHECK_MS;
    this.retryMs = opts.retryMs ?? PROOF_RETRY_MS;
    this.staleAfterMs = opts.staleAfterMs ?? STALE_AFTER_MS;
    this.batchSize = opts.batchSize ?? PROOF_BATCH_SIZE;
  }

  /**
   * Claims the entries that are due (a lease on each, so replicas check
   * different ones) and checks them side by side. A check that fails is
   * logged and tried again when its lease ends.
   */
  async runDue(): Promise<CheckOutcome[]> {
    const due = await sql<EntryRow>`
      UPDATE catalog_resources
         SET next_check_at = now() + ${LEASE_MS}::int * interval '1 millisecond'
       WHERE id IN (SELECT id FROM catalog_resources
                     WHERE next_check_at <= now()
                     ORDER BY next_check_at
                     LIMIT ${this.batchSize}::int
                     FOR UPDATE SKIP LOCKED)
         AND next_check_at <= now()
      RETURNING ${ENTRY_COLUMNS}
    `.execute(this.db);
    const outcomes = await Promise.all(
      due.rows.map((entry) =>
        this.checkEntry(entry).catch((e: unknown) => {
          this.opts.log.warn(
            { err: describeError(e), resource: entry.resource, toolName: entry.tool_name },
            "catalog ownership check failed",
          );
          return undefined;
        }),
      ),
    );
    return outcomes.filter((o): o is CheckOutcome => o !== undefined);
  }

  /** Checks one entry now, whenever it is due (tests; an operator's command). */
  async check(resource: string, toolName = ""): Promise<CheckOutcome | undefined> {
    const found = await sql<EntryRow>`
      SELECT ${ENTRY_COLUMNS} FROM catalog_resources
       WHERE resource = ${resource} AND tool_name = ${toolName}
    `.execute(this.db);
    const entry = found.rows[0];
    return entry ? this.checkEntry(entry) : undefined;
  }

  private async checkEntry(entry: EntryRow): Promise<CheckOutcome> {
    const claims = (
      await this.db
        .selectFrom("catalog_claims")
        .select(["account_id", "draft", "probe_url"])
        .where("resource", "=", entry.resource)
        .where("tool_name", "=", entry.tool_name)
        .orderBy("claimed_at")
        .limit(PROOF_MAX_CLAIMS)
        .execute()
    ).map((c) => c as ClaimRow);
    const rivals = claims.filter((c) => c.account_id !== entry.account_id);
    const http = entry.type === "http";
    const method = entry.method ?? "GET";

    // The resource's 402, fetched once per distinct URL.
    const probes = new Map<string, Promise<ProbeResult>>();
    const probeOf = (url: string | null): Promise<ProbeResult> | undefined => {
      if (!http) return undefined;
      const target = url ?? entry.resource;
      let p = probes.get(target);
      if (!p) {
        p = probeResource(target, method, this.probe);
        probes.set(target, p);
      }
      return p;
    };
    const own = await probeOf(entry.probe_url);
    const rivalProbes = await Promise.all(rivals.map((c) => probeOf(c.probe_url)));

    // Challenges, only when someone involved has published one.
    const accounts = [
      ...(entry.account_id ? [entry.account_id] : []),
      ...rivals.map((c) => c.account_id),
    ];
    const tokens = await this.tokensOf(accounts);
    const published =
      tokens.size > 0
        ? await fetchChallenges(new URL(entry.resource).origin, this.probe)
        : undefined;

    // pay_to: each account against the offers of its own URL's 402.
    const candidates: [string, ProbeResult | undefined][] = [
      ...(entry.account_id ? [[entry.account_id, own] as [string, ProbeResult | undefined]] : []),
      ...rivals.map((c, i) => [c.account_id, rivalProbes[i]] as [string, ProbeResult | undefined]),
    ];
    const paying = await this.accountsPaying(candidates);
    const proofOf = (account: string): CatalogProof | null => {
      const token = tokens.get(account);
      if (token !== undefined && published?.has(token)) return "challenge";
      return paying.has(account) ? "pay_to" : null;
    };

    const ownerProof = entry.account_id ? proofOf(entry.account_id) : null;
    let winner:
      { claim: ClaimRow; proof: CatalogProof; probe: ProbeResult | undefined } | undefined;
    rivals.forEach((claim, i) => {
      const proof = proofOf(claim.account_id);
      if (proof === null || strength(proof) <= strength(ownerProof)) return;
      // Claims come oldest first: between equal proofs the earliest wins.
      if (!winner || strength(proof) > strength(winner.proof)) {
        winner = { claim, proof, probe: rivalProbes[i] };
      }
    });

    // Liveness, from the URL the entry will be fetched at from now on.
    const live = winner ? winner.probe : own;
    const answered402 = live?.answered402;
    const now = Date.now();
    const last402 = answered402 === true ? new Date(now) : entry.last_402_at;
    const silentSince = (last402 ?? entry.cataloged_at).getTime();
    const staleNow =
      answered402 === false && (entry.state === "stale" || now - silentSince >= this.staleAfterMs);
    // Without a 402 there is nothing to prove a payTo against: what was
    // proven stays proven (an MCP entry keeps its challenge likewise).
    const proof = winner?.proof ?? ownerProof ?? (answered402 === true ? null : entry.proof);
    const state: CatalogEntryState = staleNow ? "stale" : proof ? "proven" : "unproven";
    const error = live && !live.answered402 ? live.error : undefined;
    const next = new Date(now + jitter(answered402 === false ? this.retryMs : this.recheckMs));

    const outcome: CheckOutcome = {
      resource: entry.resource,
      toolName: entry.tool_name,
      state,
      ownerAccountId: winner ? winner.claim.account_id : entry.account_id,
      proof,
      answered402,
      ...(error !== undefined ? { error } : {}),
    };

    const changedHands = await this.db.transaction().execute(async (trx) => {
      const check = {
        state,
        proof,
        last402,
        error: error ?? null,
        next,
      };
      if (winner) {
        const moved = await takeOver(trx, entry, winner.claim, check);
        if (!moved) return false;
        await trx
          .deleteFrom("catalog_claims")
          .where("resource", "=", entry.resource)
          .where("tool_name", "=", entry.tool_name)
          .where("account_id", "=", winner.claim.account_id)
          .execute();
        await trx
          .insertInto("catalog_events")
          .values({
            resource: entry.resource,
            tool_name: entry.tool_name,
            kind: "takeover",
            account_id: winner.claim.account_id,
            previous_account_id: entry.account_id,
            detail: JSON.stringify({ proof: winner.proof, previousState: entry.state }),
          })
          .execute();
      } else {
        const updated = await trx
          .updateTable("catalog_resources")
          .set({
            state,
            proof,
            proven_at: proof === null ? null : sql<Date>`coalesce(proven_at, now())`,
            last_402_at: last402,
            last_check_at: sql<Date>`now()`,
            last_check_error: error ?? null,
            next_check_at: next,
          })
          .where("id", "=", entry.id)
          .where((eb) =>
            entry.account_id === null
              ? eb("account_id", "is", null)
              : eb("account_id", "=", entry.account_id),
          )
          .executeTakeFirst();
        // The owner changed under the check (a first declaration of an
        // unowned entry): the next check decides with the new owner.
        if (updated.numUpdatedRows === 0n) return false;
        const kind = eventOf(entry.state, entry.proof, state, proof);
        if (kind) {
          await trx
            .insertInto("catalog_events")
            .values({
              resource: entry.resource,
              tool_name: entry.tool_name,
              kind,
              account_id: entry.account_id,
              previous_account_id: null,
              detail: JSON.stringify({ proof, ...(error ? { error } : {}) }),
            })
            .execute();
        }
      }
      // The owner's own claims are not claims; the others learn their verdict.
      const ownerNow = winner ? winner.claim.account_id : entry.account_id;
      if (ownerNow) {
        await trx
          .deleteFrom("catalog_claims")
          .where("resource", "=", entry.resource)
          .where("tool_name", "=", entry.tool_name)
          .where("account_id", "=", ownerNow)
          .execute();
      }
      for (const claim of rivals) {
        if (claim === winner?.claim) continue;
        await trx
          .updateTable("catalog_claims")
          .set({
            result: proofOf(claim.account_id) ? "owner_holds" : "not_proven",
            last_check_at: sql<Date>`now()`,
          })
          .where("resource", "=", entry.resource)
          .where("tool_name", "=", entry.tool_name)
          .where("account_id", "=", claim.account_id)
          .execute();
      }
      return true;
    });

    if (winner && changedHands) {
      outcome.takeover = {
        from: entry.account_id,
        to: winner.claim.account_id,
        proof: winner.proof,
      };
      this.opts.log.info(
        {
          resource: entry.resource,
          toolName: entry.tool_name,
          fromAccountId: entry.account_id,
          toAccountId: winner.claim.account_id,
          proof: winner.proof,
        },
        "catalog entry taken over: the resource names the claiming account",
      );
    }
    const listingChanged =
      (winner && changedHands) || (entry.state === "stale") !== (state === "stale");
    if (listingChanged) this.opts.onChange?.();
    if (changedHands && entry.state !== state) {
      this.opts.log.info(
        { resource: entry.resource, toolName: entry.tool_name, from: entry.state, to: state },
        "catalog entry state changed",
      );
    }
    return outcome;
  }

  /** Each account's challenge token, for those that have one. */
  private async tokensOf(accounts: readonly string[]): Promise<Map<string, string>> {
    if (accounts.length === 0) return new Map();
    const rows = await this.db
      .selectFrom("catalog_challenges")
      .select(["account_id", "token"])
      .where("account_id", "in", accounts)
      .execute();
    return new Map(rows.map((r) => [r.account_id, r.token]));
  }

  /**
   * The accounts, of those given with their 402 answer, that have a
   * succeeded settlement paying one of its offers (same network; EVM
   * addresses in any letter case, other addresses exactly). One statement;
   * each account's latest PROOF_SETTLEMENTS_SCANNED settlements are read
   * through the dashboard's (account, started_at) index.
   */
  private async accountsPaying(
    candidates: readonly [string, ProbeResult | undefined][],
  ): Promise<Set<string>> {
    const triples: [string, string, string][] = [];
    for (const [account, probe] of candidates) {
      if (!probe?.answered402) continue;
      for (const offer of probe.offers) triples.push([account, offer.network, offer.payTo]);
    }
    if (triples.length === 0) return new Set();
    const rows = await sql<{ account_id: string }>`
      SELECT DISTINCT c.account_id
        FROM unnest(${pgTextArray(triples.map((t) => t[0]))}::uuid[],
                    ${pgTextArray(triples.map((t) => t[1]))}::text[],
                    ${pgTextArray(triples.map((t) => t[2]))}::text[])
             AS c(account_id, network, pay_to)
       WHERE EXISTS (
         SELECT 1 FROM (
           SELECT s.network, s.pay_to FROM settlements s
            WHERE s.account_id = c.account_id AND s.status = 'succeeded'
            ORDER BY s.started_at DESC, s.id DESC
            LIMIT ${PROOF_SETTLEMENTS_SCANNED}::int
         ) r
         WHERE r.network = c.network
           AND (r.pay_to = c.pay_to
                OR (c.pay_to ~ '^0x[0-9A-Fa-f]{40}$' AND lower(r.pay_to) = lower(c.pay_to))))
    `.execute(this.db);
    return new Set(rows.rows.map((r) => r.account_id));
  }
}

/** ±10%, so entries checked together are not all due together again. */
function jitter(ms: number): number {
  return Math.round(ms * (0.9 + 0.2 * Math.random()));
}

/** The event a check's state change is, for the owner (none when nothing changed). */
function eventOf(
  before: CatalogEntryState,
  proofBefore: CatalogProof | null,
  after: CatalogEntryState,
  proofAfter: CatalogProof | null,
): "proven" | "unproven" | "stale" | "listed_again" | undefined {
  if (after === "stale") return before === "stale" ? undefined : "stale";
  if (before === "stale") return "listed_again";
  if (after === "proven" && (before !== "proven" || proofBefore !== proofAfter)) return "proven";
  if (after === "unproven" && before === "proven") return "unproven";
  return undefined;
}

/**
 * Gives the entry to the claimant: its declaration replaces the content
 * (one payment kind, its own), and the entry is proven by it. Refused (false)
 * when the entry changed owner meanwhile.
 */
async function takeOver(
  db: Db,
  entry: EntryRow,
  claim: ClaimRow,
  check: {
    state: CatalogEntryState;
    proof: CatalogProof | null;
    last402: Date | null;
    error: string | null;
    next: Date;
  },
): Promise<boolean> {
  const d = claim.draft;
  const result = await sql`
    UPDATE catalog_resources SET
      type = ${d.type},
      x402_version = ${d.x402Version},
      method = ${d.method ?? null},
      description = ${d.description ?? null},
      mime_type = ${d.mimeType ?? null},
      service_name = ${d.serviceName ?? null},
      tags = ${pgTextArray(d.tags ?? [])}::text[],
      icon_url = ${d.iconUrl ?? null},
      accepts = ${JSON.stringify([d.accept])}::jsonb,
      extension_keys = ${pgTextArray(d.extensionKeys)}::text[],
      bazaar = ${JSON.stringify(d.bazaar)}::jsonb,
      search_vector = ${searchVector(d)},
      account_id = ${claim.account_id},
      probe_url = ${claim.probe_url},
      state = ${check.state},
      proof = ${check.proof},
      proven_at = now(),
      last_402_at = ${check.last402},
      last_check_at = now(),
      last_check_error = ${check.error},
      next_check_at = ${check.next},
      last_updated = now()
    WHERE id = ${entry.id} AND account_id IS NOT DISTINCT FROM ${entry.account_id}::uuid
  `.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}
