/**
 * Fills the catalog from payments, and only from payments: the single write
 * path. PaymentService calls it after a /verify that is valid and after a
 * /settle that succeeded, when the payload opts into `bazaar`.
 *
 * Invariants:
 * - It never fails the payment. A bad declaration or a database error is
 *   reported as `rejected` (and logged); nothing is thrown.
 * - It never holds the payment up for long: past `writeBudgetMs` the answer
 *   is `processing` and the write completes on its own; `drain()` waits for
 *   such writes at shutdown so none is lost.
 * - /verify is free and unmetered, so a declaration already stored with the
 *   same content in the last `verifyRefreshIntervalMs` is answered from
 *   memory. /settle always writes: a successful settle is the refresh.
 * - Another account's declaration of an entry changes nothing of it: it is
 *   recorded as that account's claim and answered `processing` with
 *   `action: "claimed"`; the proof checker (ownershipChecker.ts) later gives
 *   the entry to whichever account the resource's own 402 answer names.
 *   That answer is remembered like a stored one, so repeating it within the
 *   refresh interval costs no write either.
 * - Nothing here fetches anything: proofs run in the background, so
 *   /verify and /settle never wait for a resource server.
 */
import { createHash } from "node:crypto";
import stringify from "safe-stable-stringify";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  BAZAAR,
  validateDiscoveryExtension,
  type DiscoveryExtension,
  type ValidationResult,
} from "@x402/extensions/bazaar";
import { describeError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { Db } from "../../storage/db.js";
import { MIN_CHECK_GAP_MS, upsertCatalogEntry } from "./catalogRepository.js";
import { readDeclaration, type CatalogDraft } from "./declaration.js";
import { CATALOG_WRITE_BUDGET_MS, VERIFY_REFRESH_INTERVAL_MS } from "./limits.js";
import { rememberBounded } from "../../lib/boundedMap.js";

/**
 * The `bazaar` member of the EXTENSION-RESPONSES header. `status` and
 * `rejectedReason` are the official fields; `action` and `resource` say what
 * happened to which entry.
 */
export type BazaarResponse =
  | {
      status: "success";
      /** New entry, existing entry refreshed, or already current (verify only). */
      action: "cataloged" | "refreshed" | "unchanged";
      resource: string;
    }
  | {
      status: "processing";
      resource: string;
      /**
       * `claimed`: another account holds the entry; this declaration is kept
       * as a claim until the resource's 402 answer decides who owns it.
       * Absent: the write outlived its budget and completes in the background.
       */
      action?: "claimed";
    }
  | { status: "rejected"; rejectedReason: string };

export type CatalogTrigger = "verify" | "settle";

export interface CatalogerOptions {
  /** Devnet mode: resource servers on loopback may be cataloged. */
  allowPrivateHosts: boolean;
  /** A claim asks for a check no sooner than this after the last (default 5 min). */
  minCheckGapMs?: number;
  writeBudgetMs?: number;
  verifyRefreshIntervalMs?: number;
  /** Called when an entry is added or its content changes (read-cache invalidation). */
  onChange?: () => void;
  now?: () => number;
}

interface Remembered {
  at: number;
  /** The answer that write earned: `unchanged` for a stored entry, or the refusal. */
  answer: BazaarResponse;
}

const MAX_REMEMBERED = 10_000;
const CATALOG_UNAVAILABLE =
  "the catalog could not be updated just now; the next payment for this resource will retry";
/** Names no account: the owner's identity is not the declarer's business. */
const OWNED_ELSEWHERE =
  "this resource is cataloged by another account; a declaration without an account cannot claim it";

function claimedAnswer(resource: string): BazaarResponse {
  return { status: "processing", resource, action: "claimed" };
}

function hash(value: unknown): string {
  return createHash("sha256")
    .update(stringify(value) ?? "")
    .digest("base64url");
}

export class Cataloger {
  /** Verify fingerprint -> last successful catalog write of that content. */
  private readonly recentlyStored = new Map<string, Remembered>();
  /** Catalog key -> fingerprint of the content this process last wrote there. */
  private readonly storedContent = new Map<string, string>();
  /** Declaration fingerprint -> schema validation verdict (compiling costs milliseconds). */
  private readonly validations = new Map<string, ValidationResult>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly budgetMs: number;
  private readonly refreshIntervalMs: number;
  private readonly now: () => number;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly opts: CatalogerOptions,
  ) {
    this.budgetMs = opts.writeBudgetMs ?? CATALOG_WRITE_BUDGET_MS;
    this.refreshIntervalMs = opts.verifyRefreshIntervalMs ?? VERIFY_REFRESH_INTERVAL_MS;
    this.now = opts.now ?? Date.now;
  }

  /**
   * After a payment verified (`verify`) or settled (`settle`). Returns
   * undefined when the payload does not opt into bazaar.
   */
  async record(
    trigger: CatalogTrigger,
    accountId: string | null,
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<BazaarResponse | undefined> {
    if (payload.extensions?.[BAZAAR.key] === undefined) return undefined;
    try {
      // The account is part of the content: the same declaration from
      // another account may earn another answer (a claim).
      const fingerprint = hash({
        accountId,
        resource: payload.resource,
        bazaar: payload.extensions[BAZAAR.key],
        extensions: Object.keys(payload.extensions).sort(),
        requirements,
      });
      if (trigger === "verify") {
        const recent = this.recentlyStored.get(fingerprint);
        if (recent && this.now() - recent.at < this.refreshIntervalMs) return recent.answer;
      }
      const declaration = readDeclaration(payload, requirements, {
        allowPrivateHosts: this.opts.allowPrivateHosts,
        validateInfo: (extension) => this.validate(extension),
      });
      if (declaration.kind === "absent") return undefined;
      if (declaration.kind === "rejected") {
        this.log.debug({ trigger, reason: declaration.reason }, "bazaar declaration rejected");
        return { status: "rejected", rejectedReason: declaration.reason };
      }
      return await this.write(declaration.draft, accountId, fingerprint, trigger);
    } catch (e) {
      this.log.warn({ err: describeError(e), trigger }, "cataloging failed");
      return { status: "rejected", rejectedReason: CATALOG_UNAVAILABLE };
    }
  }

  /** A payment that did not verify or settle: nothing is cataloged. */
  declined(trigger: CatalogTrigger, payload: PaymentPayload): BazaarResponse | undefined {
    if (payload.extensions?.[BAZAAR.key] === undefined) return undefined;
    return {
      status: "rejected",
      rejectedReason:
        trigger === "verify"
          ? "the payment did not verify; resources are cataloged only behind a valid payment"
          : "the settlement did not succeed (or is not confirmed yet); the entry was not refreshed",
    };
  }

  private validate(extension: DiscoveryExtension): ValidationResult {
    const key = hash({ info: extension.info, schema: extension.schema });
    const known = this.validations.get(key);
    if (known) return known;
    const verdict = validateDiscoveryExtension(extension);
    rememberBounded(this.validations, key, verdict, MAX_REMEMBERED);
    return verdict;
  }

  /** Waits for writes that outlived their budget (call before closing the database). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  private async write(
    draft: CatalogDraft,
    accountId: string | null,
    fingerprint: string,
    trigger: CatalogTrigger,
  ): Promise<BazaarResponse> {
    const key = `${draft.resource}\n${draft.toolName}`;
    // What the listing shows: the URL fetched for proofs is not part of it.
    const content = hash({ ...draft, probeUrl: undefined });
    const write = upsertCatalogEntry(this.db, draft, accountId, {
      minCheckGapMs: this.opts.minCheckGapMs ?? MIN_CHECK_GAP_MS,
    }).then((result) => {
      if (result.kind === "claimed") {
        // Ids only: enough for an operator to see who claims whose entry.
        this.log.info(
          {
            trigger,
            resource: draft.resource,
            toolName: draft.toolName,
            ownerAccountId: result.ownerAccountId,
            declaringAccountId: accountId,
            newClaim: result.newClaim,
          },
          "catalog declaration recorded as a claim: the entry belongs to another account until the resource names the claimant",
        );
        rememberBounded(
          this.recentlyStored,
          fingerprint,
          { at: this.now(), answer: claimedAnswer(draft.resource) },
          MAX_REMEMBERED,
        );
        return result;
      }
      if (result.kind === "owned_elsewhere") {
        // Ids only: enough for an operator to see who tried to take whose entry.
        this.log.info(
          {
            trigger,
            resource: draft.resource,
            toolName: draft.toolName,
            ownerAccountId: result.ownerAccountId,
            declaringAccountId: accountId,
          },
          "catalog declaration ignored: the entry belongs to another account",
        );
        rememberBounded(
          this.recentlyStored,
          fingerprint,
          { at: this.now(), answer: { status: "rejected", rejectedReason: OWNED_ELSEWHERE } },
          MAX_REMEMBERED,
        );
        return result;
      }
      rememberBounded(
        this.recentlyStored,
        fingerprint,
        {
          at: this.now(),
          answer: { status: "success", action: "unchanged", resource: draft.resource },
        },
        MAX_REMEMBERED,
      );
      const changed = result.inserted || this.storedContent.get(key) !== content;
      rememberBounded(this.storedContent, key, content, MAX_REMEMBERED);
      if (changed) this.opts.onChange?.();
      return result;
    });
    this.inFlight.add(write);
    void write.then(
      () => this.inFlight.delete(write),
      (e: unknown) => {
        this.inFlight.delete(write);
        this.log.warn(
          { err: describeError(e), trigger, resource: draft.resource },
          "catalog write failed",
        );
      },
    );

    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), this.budgetMs);
    });
    try {
      const outcome = await Promise.race([write, budget]);
      if (outcome === "timeout") {
        this.log.info({ trigger, resource: draft.resource }, "catalog write outlived its budget");
        return { status: "processing", resource: draft.resource };
      }
      if (outcome.kind === "owned_elsewhere") {
        return { status: "rejected", rejectedReason: OWNED_ELSEWHERE };
      }
      if (outcome.kind === "claimed") return claimedAnswer(draft.resource);
      return {
        status: "success",
        action: outcome.inserted ? "cataloged" : "refreshed",
        resource: draft.resource,
      };
    } catch {
      // Logged by the handler attached above.
      return { status: "rejected", rejectedReason: CATALOG_UNAVAILABLE };
    } finally {
      clearTimeout(timer);
    }
  }
}
