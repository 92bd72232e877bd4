/**
 * Idempotent settle by `payment-identifier` id (spec 3.2 and 6.2).
 *
 * An id is scoped to the API key. Before a settle runs, its id is claimed
 * with one INSERT on the unique (api_key_id, id): the winner executes; a
 * loser with the same payment waits for the winner's outcome, and a loser
 * with a different payment gets 409. A success binds the id to the response,
 * which is replayed verbatim afterwards (no transaction, no quota); a failure
 * deletes the row, so a retry re-executes.
 *
 * Within one process, duplicates share the winner's promise (same body, same
 * error). Across replicas the row is the lock: waiters poll it until it is
 * bound or released. An `executing` row older than `staleAfterMs` (its
 * process died mid-settle) may be taken over; re-running the same signed
 * payment cannot move money twice, because the chain rejects a used nonce.
 */
import type { SettleResponse } from "@x402/core/types";
import {
  PAYMENT_IDENTIFIER,
  extractAndValidatePaymentIdentifier,
  isPaymentIdentifierRequired,
} from "@x402/extensions/payment-identifier";
import type { PaymentPayload } from "@x402/core/types";
import type { Db } from "../../storage/db.js";
import { ServiceError } from "../../lib/errors.js";

/**
 * The id a payload carries, validated with the extension's own helpers.
 * Returns null when the payload does not use the extension; throws 400
 * `invalid_payment_identifier` for a malformed id, or a missing one where the
 * payload declares it required.
 */
export function readPaymentIdentifier(payload: PaymentPayload): string | null {
  const ext = payload.extensions?.[PAYMENT_IDENTIFIER];
  if (ext === undefined || ext === null) return null;
  const { id, validation } = extractAndValidatePaymentIdentifier(payload);
  if (!validation.valid) {
    throw new ServiceError(
      "invalid_payment_identifier",
      `paymentPayload.extensions["payment-identifier"] is malformed: ${(validation.errors ?? []).join("; ")}. ` +
        "The id must be 16-128 characters of letters, digits, '-' and '_'",
    );
  }
  if (!id && isPaymentIdentifierRequired(ext)) {
    throw new ServiceError(
      "invalid_payment_identifier",
      "paymentPayload.extensions[\"payment-identifier\"] declares required: true but has no info.id; add an id (16-128 characters of letters, digits, '-' and '_')",
    );
  }
  return id;
}

export type ClaimOutcome = { kind: "claimed" } | { kind: "replay"; response: SettleResponse };

export interface PaymentIdentifierOptions {
  /** How often a waiter re-reads a row another replica is executing. */
  pollMs?: number;
  /** How long a waiter waits before answering 409 "still in progress". */
  maxWaitMs?: number;
  /** An `executing` row older than this is abandoned and may be taken over. */
  staleAfterMs?: number;
  /** Told when a bind or release could not be written (the settle's answer stands). */
  onError?: (e: unknown, what: string) => void;
}

export class PaymentIdentifierStore {
  private readonly inFlight = new Map<string, { fingerprint: string; done: Promise<unknown> }>();
  private readonly pollMs: number;
  private readonly maxWaitMs: number;
  private readonly staleAfterMs: number;
  private readonly onError: (e: unknown, what: string) => void;

  constructor(
    private readonly db: Db,
    opts: PaymentIdentifierOptions = {},
  ) {
    this.pollMs = opts.pollMs ?? 50;
    this.maxWaitMs = opts.maxWaitMs ?? 90_000;
    this.staleAfterMs = opts.staleAfterMs ?? 180_000;
    this.onError = opts.onError ?? (() => {});
  }

  /**
   * Runs `execute` at most once per (key, id) at a time and binds its
   * successful response; duplicates get the bound response.
   */
  async settleOnce(
    apiKeyId: string,
    id: string,
    fingerprint: string,
    execute: () => Promise<SettleResponse>,
  ): Promise<SettleResponse> {
    const key = `${apiKeyId}\u0000${id}`;
    for (;;) {
      const running = this.inFlight.get(key);
      if (!running) break;
      if (running.fingerprint !== fingerprint) throw conflict(id);
      // Same payment already executing here: share its outcome.
      return (await running.done) as SettleResponse;
    }
    const done = this.claimAndRun(apiKeyId, id, fingerprint, execute);
    this.inFlight.set(key, { fingerprint, done });
    try {
      return await done;
    } finally {
      this.inFlight.delete(key);
    }
  }

  private async claimAndRun(
    apiKeyId: string,
    id: string,
    fingerprint: string,
    execute: () => Promise<SettleResponse>,
  ): Promise<SettleResponse> {
    const outcome = await this.claim(apiKeyId, id, fingerprint);
    if (outcome.kind === "replay") return outcome.response;
    let result: SettleResponse;
    try {
      result = await execute();
    } catch (e) {
      await this.finish(apiKeyId, id, undefined);
      throw e;
    }
    await this.finish(apiKeyId, id, result.success ? result : undefined);
    return result;
  }

  /**
   * Binds a success or releases the id, never throwing: the settle's answer
   * must reach the caller. A row left `executing` is taken over once stale.
   */
  private async finish(apiKeyId: string, id: string, bound: SettleResponse | undefined) {
    try {
      if (bound) await this.bind(apiKeyId, id, bound);
      else await this.release(apiKeyId, id);
    } catch (e) {
      this.onError(e, bound ? "payment-identifier bind" : "payment-identifier release");
    }
  }

  /** Claims the id, or waits for whoever holds it. */
  async claim(apiKeyId: string, id: string, fingerprint: string): Promise<ClaimOutcome> {
    const deadline = Date.now() + this.maxWaitMs;
    for (;;) {
      const inserted = await this.db
        .insertInto("payment_identifiers")
        .values({ api_key_id: apiKeyId, id, fingerprint, status: "executing", response: null })
        .onConflict((oc) => oc.columns(["api_key_id", "id"]).doNothing())
        .returning("id")
        .executeTakeFirst();
      if (inserted) return { kind: "claimed" };
      const row = await this.db
        .selectFrom("payment_identifiers")
        .select(["fingerprint", "status", "response", "claimed_at"])
        .where("api_key_id", "=", apiKeyId)
        .where("id", "=", id)
        .executeTakeFirst();
      if (!row) continue; // released between our insert and read: try again
      if (row.fingerprint !== fingerprint) throw conflict(id);
      if (row.status === "bound" && row.response !== null) {
        return { kind: "replay", response: JSON.parse(row.response) as SettleResponse };
      }
      if (Date.now() - new Date(row.claimed_at).getTime() > this.staleAfterMs) {
        // Its process died mid-settle: take the claim over.
        const taken = await this.db
          .updateTable("payment_identifiers")
          .set({ claimed_at: new Date() })
          .where("api_key_id", "=", apiKeyId)
          .where("id", "=", id)
          .where("status", "=", "executing")
          .where("claimed_at", "=", row.claimed_at)
          .returning("id")
          .executeTakeFirst();
        if (taken) return { kind: "claimed" };
        continue;
      }
      if (Date.now() > deadline) {
        throw new ServiceError(
          "conflict",
          "a settle with this payment-identifier is still in progress; retry shortly to get its result",
          { retryable: true },
        );
      }
      await new Promise((r) => setTimeout(r, this.pollMs));
    }
  }

  async bind(apiKeyId: string, id: string, response: SettleResponse): Promise<void> {
    await this.db
      .updateTable("payment_identifiers")
      .set({ status: "bound", response: JSON.stringify(response), bound_at: new Date() })
      .where("api_key_id", "=", apiKeyId)
      .where("id", "=", id)
      .execute();
  }

  async release(apiKeyId: string, id: string): Promise<void> {
    await this.db
      .deleteFrom("payment_identifiers")
      .where("api_key_id", "=", apiKeyId)
      .where("id", "=", id)
      .where("status", "=", "executing")
      .execute();
  }
}

function conflict(id: string): ServiceError {
  return new ServiceError(
    "payment_identifier_conflict",
    `payment-identifier "${id}" is already used for a different payment with this API key; use a new id for a new payment`,
    { details: { paymentIdentifier: id } },
  );
}
