/**
 * Keeps watching settlements answered `success: true` for a while after
 * the answer, because the chain can take a block back (a reorg) and with it
 * the transfer we promised. Each recent success is asked of the chain by
 * its family's reconciliation (the same code that finishes interrupted
 * settlements): a transaction no longer on the canonical chain is re-sent
 * exactly as it was signed and journaled (same hash, same nonce: it cannot
 * move money twice), and lands again. When the family says that
 * transaction can no longer be mined, on two passes in a row, the payment
 * is not given up while its authorization can still land: the family sends
 * the same call again at a new nonce (`reland`; another transaction took
 * the old one), and the row names the transaction that landed (or the one
 * a stranger landed with the payer's authorization). Only on the chain's
 * positive word that none of its transactions is mined and that the
 * payment cannot land either (the authorization used elsewhere without the
 * promised transfer, or expired, the funds gone) is the success recorded as
 * failed, with a `settlement.failed` event and its quota charge given back:
 * the records then agree with the chain. A read that fails is no verdict:
 * such a success stays a success and is asked again, past its window if
 * need be. Were a success whose authorization is still good recorded
 * failed, the merchant would lose a payment it was promised, and the
 * payer's authorization could be settled a second time.
 *
 * A success whose transaction was sent again is followed past its window
 * until the chain decides it: until the transaction that landed has itself
 * been watched for a window, since a reorg can take it back as well. The
 * journal keeps a success's signed bytes for exactly those re-sends, and
 * this watcher drops them once the watch (and any following) is over.
 */
import type { Logger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import type { PendingSettlement, ReconcileOutcome } from "../chains/ports.js";
import type { SettlementRecorder } from "../features/settlements/settlementRecorder.js";
import type { SettlementRow } from "../storage/schema.js";

export interface SuccessWatcherOptions {
  recorder: SettlementRecorder;
  reconcile: (pending: PendingSettlement) => Promise<ReconcileOutcome>;
  /** Sends a success's call again at a new nonce, where its family can (`ChainFamily.reland`). */
  reland?: (pending: PendingSettlement & { id: string }) => Promise<ReconcileOutcome> | undefined;
  /**
   * The networks whose successes a reorg can take back (absent: every
   * network). A family that answers success only once its chain is final
   * has nothing here to watch (`ChainFamily.successIsFinal`).
   */
  networks?: readonly string[];
  /**
   * Of one network's successes, the transactions the chain still holds
   * landed, asked together (`ChainFamily.stillLanded`). The others, and
   * every success without it, are asked one at a time through `reconcile`.
   */
  stillLanded?: (network: string, references: readonly string[]) => Promise<ReadonlySet<string>>;
  log: Logger;
  /** How long after its answer a success is watched. */
  windowMs: number;
  intervalMs?: number;
  /** Told of each success taken back: re-sent, or recorded failed. */
  onTakenBack?: (row: { id: string; network: string; outcome: "resent" | "failed" }) => void;
}

/** Successes asked of the chain per pass, and how many at a time. */
const PER_PASS = 200;
const AT_A_TIME = 8;

/** Signed material past its watch is swept every this many passes. */
const DROP_EVERY_PASSES = 10;
/**
 * How long a success whose reads keep failing is asked again past its
 * window before it is given up on (loudly); a re-sent one is followed until
 * the chain decides it, and only told of (loudly) past this.
 */
const FOLLOW_MS = 60 * 60 * 1000;
/** At most this many re-sent successes followed at once (a reorg deeper than any seen). */
const FOLLOWED_MAX = 10_000;

export class SuccessWatcher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Successes the chain said could not land on the last pass: asked again on the next. */
  private readonly doomed = new Map<string, SettlementRow>();
  /**
   * Successes asked on every pass even once they are older than the window
   * (nothing else would ever look at them again): those whose transaction
   * was sent again (the same bytes, or the same payment at a new nonce),
   * until it has landed and been watched for a window itself; and those
   * whose reads failed, until the chain answers.
   */
  private readonly following = new Map<string, Followed>();
  /**
   * Where the next page of the window starts: each pass takes the next
   * successes, older than the last page's, and the newest again once the
   * window is done. Every success in the window is asked in turn, however
   * many settle a second (a first page alone would ask only the newest).
   */
  private cursor: SettlementRow | undefined;
  private passes = 0;

  constructor(private readonly opts: SuccessWatcherOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.opts.intervalMs ?? 3_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  runOnce(): Promise<void> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<void> {
    const { recorder, log, networks } = this.opts;
    const perPass = PER_PASS;
    let page: SettlementRow[] = [];
    try {
      const since = new Date(Date.now() - this.opts.windowMs);
      if (!networks || networks.length > 0) {
        page = await recorder.reads.recentSuccesses(since, perPass, this.cursor, networks);
      }
    } catch (e) {
      log.warn({ err: describeError(e) }, "could not read recent successes");
      return;
    }
    this.cursor = page.length < perPass ? undefined : page[page.length - 1];
    const onPage = new Set(page.map((r) => r.id));
    const landed = await this.stillLanded(page.filter((r) => !this.doomed.has(r.id)));
    const followed = this.followedRows(onPage);
    const rows = [
      ...[...this.doomed.values()].filter((r) => !onPage.has(r.id)),
      ...followed,
      ...page.filter((r) => !landed.has(r.id)),
    ];
    for (let i = 0; i < rows.length; i += AT_A_TIME) {
      await Promise.all(rows.slice(i, i + AT_A_TIME).map((row) => this.recheck(row)));
    }
    // Once a success's watch is over nothing will send it again, so its
    // signed bytes need not stay at rest. Not every pass: it is a sweep.
    if (++this.passes % DROP_EVERY_PASSES === 0) {
      try {
        await recorder.journal.dropSignedMaterial(new Date(Date.now() - this.opts.windowMs), [
          ...new Set([...this.following.keys(), ...this.doomed.keys()]),
        ]);
      } catch (e) {
        log.warn({ err: describeError(e) }, "could not drop signed material yet");
      }
    }
  }

  /**
   * The followed successes to ask on this pass, past the page and the
   * doomed ones. One whose reads failed for longer than FOLLOW_MS is given
   * up on, loudly (its record keeps the success); a re-sent one still
   * unmined by then is told of, once, and still followed.
   */
  private followedRows(onPage: ReadonlySet<string>): SettlementRow[] {
    const now = Date.now();
    const rows: SettlementRow[] = [];
    for (const [id, f] of this.following) {
      // Landed again, and watched for a window since: as final as any success.
      if (f.landedAt !== undefined && now - f.landedAt > this.opts.windowMs) {
        this.following.delete(id);
        continue;
      }
      if (now - f.since > FOLLOW_MS && !f.told) {
        const { network, transaction } = f.row;
        if (f.kind === "unanswered") {
          this.following.delete(id);
          this.opts.log.error(
            { settlementId: id, network, transaction },
            "a settled payment's chain could not be read for an hour after its window; no longer asked",
          );
          continue;
        }
        f.told = true;
        this.opts.log.error(
          { settlementId: id, network, transaction },
          "a settled payment re-sent after a reorg is still not final after an hour; still followed",
        );
      }
      if (!onPage.has(id) && !this.doomed.has(id)) rows.push(f.row);
    }
    return rows;
  }

  /**
   * Asks about a success on every pass, past its window: `resent`, its
   * transaction was sent again (the row keeps the transaction it names: a
   * re-send at a new nonce is journaled against the settlement, where the
   * next pass reads it, and the row moves to it once it is mined);
   * `unanswered`, its reads failed. A re-sent one stays re-sent.
   */
  private follow(row: SettlementRow, kind: Followed["kind"]): void {
    const known = this.following.get(row.id);
    if (known) {
      if (kind === "resent") {
        known.kind = "resent";
        delete known.landedAt;
      }
      return;
    }
    if (this.following.size >= FOLLOWED_MAX) return;
    this.following.set(row.id, { row, since: Date.now(), kind });
  }

  /**
   * The chain holds a followed success landed, in `transaction`: one whose
   * reads had failed is answered; a re-sent one is followed on for a
   * window from the first time it was seen landed, as a fresh success would
   * be (`followedRows` lets it go then).
   */
  private landed(id: string, transaction: string): void {
    const f = this.following.get(id);
    if (!f) return;
    if (f.kind === "unanswered") {
      this.following.delete(id);
      return;
    }
    f.row = { ...f.row, transaction };
    f.landedAt ??= Date.now();
  }

  /**
   * The ids of the successes whose transactions the chain still holds
   * landed, asked a network at a time. Nothing else is needed of those:
   * their records already agree with the chain. A read that fails confirms
   * nothing, and its successes are asked one at a time.
   */
  private async stillLanded(rows: readonly SettlementRow[]): Promise<Set<string>> {
    const landed = new Set<string>();
    const ask = this.opts.stillLanded;
    if (!ask) return landed;
    const byNetwork = new Map<string, SettlementRow[]>();
    for (const row of rows) {
      const group = byNetwork.get(row.network);
      if (group) group.push(row);
      else byNetwork.set(row.network, [row]);
    }
    await Promise.all(
      [...byNetwork].map(async ([network, group]) => {
        try {
          const still = await ask(
            network,
            group.map((r) => r.transaction!),
          );
          for (const row of group) if (still.has(row.transaction!)) landed.add(row.id);
        } catch (e) {
          this.opts.log.debug(
            { err: describeError(e), network },
            "could not ask successes together",
          );
        }
      }),
    );
    return landed;
  }

  /** Asks the chain about one success, and acts on its answer. */
  private async recheck(row: SettlementRow): Promise<void> {
    const { recorder, log } = this.opts;
    try {
      const pending = await recorder.journal.pendingSettlement(row);
      let outcome = await this.opts.reconcile(pending);
      if (outcome.status === "succeeded") {
        this.doomed.delete(row.id);
        await this.namesLanded(row, outcome.transaction, "landed again in another transaction");
        this.landed(row.id, outcome.transaction);
        return;
      }
      if (outcome.status === "pending") {
        this.doomed.delete(row.id);
        this.follow(row, "resent");
        log.warn(
          { settlementId: row.id, network: row.network, transaction: row.transaction },
          "a settled payment's transaction left the canonical chain (a reorg); re-sent it from the journal",
        );
        this.opts.onTakenBack?.({ id: row.id, network: row.network, outcome: "resent" });
        return;
      }
      if (!this.doomed.has(row.id)) {
        this.doomed.set(row.id, row);
        return;
      }
      this.doomed.delete(row.id);
      // Its transaction cannot be mined; its authorization may still land.
      // The family answers `failed` only on the chain's positive word that
      // nothing of it is mined and it cannot land (a failed read throws).
      const again = await this.opts.reland?.({ ...pending, id: row.id });
      if (again?.status === "succeeded") {
        // Landed already, in a transaction someone else sent with the
        // payer's authorization: the row names it.
        await this.namesLanded(
          row,
          again.transaction,
          "was paid by another transaction with the same authorization",
        );
        this.following.delete(row.id);
        return;
      }
      if (again && again.status !== "failed") {
        this.follow(row, "resent");
        log.warn(
          { settlementId: row.id, network: row.network, transaction: again.transaction },
          "a settled payment's transaction left the canonical chain and lost its nonce; sent the same payment again",
        );
        this.opts.onTakenBack?.({ id: row.id, network: row.network, outcome: "resent" });
        return;
      }
      if (again) outcome = { ...outcome, message: `${outcome.message}; ${again.message}` };
      this.following.delete(row.id);
      const revoked = await recorder.revokeSuccess(row.id, outcome, pending.transactions);
      if (revoked) {
        log.error(
          { settlementId: row.id, network: row.network, outcome },
          "a settled payment's transaction left the canonical chain and can no longer land; recorded it failed",
        );
        this.opts.onTakenBack?.({ id: row.id, network: row.network, outcome: "failed" });
      }
    } catch (e) {
      // No verdict: asked again on the next pass, past its window if need be.
      this.follow(row, "unanswered");
      log.warn({ err: describeError(e), settlementId: row.id }, "could not recheck a success yet");
    }
  }

  /** The row names `transaction`, which holds its payment, when it named another. */
  private async namesLanded(row: SettlementRow, transaction: string, how: string): Promise<void> {
    const named = this.following.get(row.id)?.row.transaction ?? row.transaction;
    if (!named || transaction.toLowerCase() === named.toLowerCase()) return;
    if (await this.opts.recorder.relanded(row.id, named, transaction)) {
      this.opts.log.warn(
        { settlementId: row.id, network: row.network, transaction },
        `a settled payment taken back by a reorg ${how}`,
      );
    }
  }
}

/** A success asked past its window (`SuccessWatcher.following`). */
interface Followed {
  row: SettlementRow;
  /** When it was first followed. */
  since: number;
  kind: "resent" | "unanswered";
  /** When the chain first held its re-sent transaction landed. */
  landedAt?: number;
  /** Whether its hour past FOLLOW_MS was told of. */
  told?: boolean;
}
