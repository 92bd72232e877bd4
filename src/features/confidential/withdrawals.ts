/**
 * Withdrawals (spec 3.4). The merchant's wallet signs a request; we submit it
 * and pay the gas; the contract debits the encrypted balance without
 * revealing it (an amount above the available balance debits nothing); we
 * finalize with the decryption proof and the USDC goes to the withdrawal
 * address. A row is written before anything is sent and moved on as the
 * chain answers, so a crash leaves a row the finalizer picks up again; the
 * contract refuses a request or a finalization twice.
 */
import { randomUUID } from "node:crypto";
import {
  BaseError,
  getAddress,
  verifyTypedData,
  type Hex,
  type TypedDataDefinition,
} from "../../chains/confidentialPort.js";
import type { Kysely } from "kysely";
import { describeError, ServiceError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import { redactUrls } from "../../lib/redactUrls.js";
import type { Database, WithdrawalState } from "../../storage/schema.js";
import type { ConfidentialMerchants } from "./merchants.js";
import type { ConfidentialVault, WithdrawRequest } from "./vaultPort.js";

export interface WithdrawalListing {
  id: string;
  /** Its id on the vault, once submitted. */
  onchainId: string | null;
  amount: string;
  state: WithdrawalState;
  paidAmount: string | null;
  requestTransaction: string | null;
  finalizeTransaction: string | null;
  error: string | null;
  createdAt: string;
  updatedAt: string;
}

/** JSON cannot carry bigints: typed data goes to the browser with decimal strings. */
function jsonSafe(v: unknown): unknown {
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v)) return v.map(jsonSafe);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, jsonSafe(x)]));
  }
  return v;
}

export class ConfidentialWithdrawals {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly vault: ConfidentialVault,
    private readonly merchants: ConfidentialMerchants,
    private readonly log: Logger,
    private readonly opts: { resubmitAfterMs: number } = { resubmitAfterMs: 60_000 },
  ) {}

  /** What the merchant's wallet signs to withdraw `amount` (atomic USDC units). */
  async typedData(accountId: string, amountInput: string): Promise<unknown> {
    const { merchant, slot } = await this.enabledMerchant(accountId);
    const amount = parseAmount(amountInput);
    const { typedData } = await this.vault
      .prepareWithdraw({ slot, merchant, amount })
      .catch((e: unknown) => {
        throw new ServiceError(
          "service_unavailable",
          "the chain could not be read to prepare the withdrawal; retry shortly",
          { retryable: true, cause: e },
        );
      });
    return jsonSafe(typedData);
  }

  /** Submits a signed request, then finalizes it. Returns the row as it ends. */
  async submit(
    accountId: string,
    typedData: TypedDataDefinition,
    signature: string,
  ): Promise<WithdrawalListing> {
    const { merchant, slot, secret } = await this.enabledMerchant(accountId);
    if (!/^0x[0-9a-fA-F]+$/.test(signature)) {
      throw new ServiceError("invalid_request", "signature must be a 0x-prefixed hex string");
    }
    const message = (typedData?.message ?? {}) as Record<string, unknown>;
    const domain = (typedData?.domain ?? {}) as Record<string, unknown>;
    if (
      String(domain["verifyingContract"] ?? "").toLowerCase() !== this.vault.address.toLowerCase()
    ) {
      throw new ServiceError(
        "invalid_request",
        "the request is not addressed to the privacy contract",
      );
    }
    if (message["slot"] !== undefined && String(message["slot"]) !== slot.toString()) {
      throw new ServiceError("invalid_request", "the request names another merchant's slot");
    }
    const request = requestFrom(message);
    const amount = request.amount;
    if (request.to !== merchant) {
      throw new ServiceError("invalid_request", `withdrawals go only to ${merchant}`);
    }
    // Checked against the contract's own typed data, not the one posted.
    const valid = await verifyTypedData({
      ...this.vault.withdrawTypedData(request),
      address: merchant,
      signature: signature as Hex,
    }).catch(() => false);
    if (!valid) {
      throw new ServiceError(
        "invalid_request",
        `the request is not signed by the withdrawal wallet ${merchant}`,
      );
    }
    // A request signed before an earlier one landed carries that one's nonce:
    // it can never land, and must not be shown as a second payout.
    const onChain = await this.vault.findWithdrawal(request).catch((e: unknown) => {
      throw new ServiceError(
        "service_unavailable",
        "the privacy contract could not be read just now; submit the same signed request again",
        { retryable: true, cause: e },
      );
    });
    if (onChain.state !== "unused") {
      throw new ServiceError(
        "conflict",
        onChain.state === "landed"
          ? "this signed request was submitted already; it is listed with your withdrawals"
          : "this request's nonce was used by another withdrawal; prepare and sign a new request",
      );
    }
    const id = randomUUID();
    const inserted = await this.db
      .insertInto("confidential_withdrawals")
      .values({
        id,
        account_id: accountId,
        amount: amount.toString(),
        request: JSON.stringify(jsonSafe(typedData)),
        signature,
        state: "submitting",
      })
      .onConflict((oc) => oc.doNothing())
      .returning("id")
      .executeTakeFirst();
    if (!inserted) {
      throw new ServiceError(
        "conflict",
        "an earlier withdrawal is still on its way to the chain; wait until it shows as debited or failed",
      );
    }
    try {
      await this.markSubmitted(
        id,
        await this.vault.submitWithdraw({ request, secret, signature: signature as Hex }),
      );
    } catch (e) {
      // Whether it reached the chain is unknown: the row stays `submitting`
      // and the worker submits the same signed request again (the contract
      // takes it once) or, past its deadline, learns that it never landed.
      await this.update(id, { error: storableError(e) });
      throw new ServiceError(
        "service_unavailable",
        "the withdrawal request could not be confirmed on-chain yet; it is retried automatically and shows here as debited or failed",
        { retryable: false, cause: e },
      );
    }
    await this.finalize(id);
    return (await this.find(accountId, id))!;
  }

  /**
   * Moves on every open withdrawal (after a crash, a lost answer or a failed
   * finalization): an unconfirmed request is submitted again, a debited one
   * finalized.
   */
  async finalizeOpen(): Promise<number> {
    // A request is submitted again only once it has been left alone a while:
    // one just inserted is still being submitted by its own HTTP request.
    const quietSince = new Date(Date.now() - this.opts.resubmitAfterMs);
    const open = await this.db
      .selectFrom("confidential_withdrawals")
      .select(["id", "account_id", "state", "request", "signature"])
      .where(({ eb, or, and }) =>
        or([
          eb("state", "=", "debited"),
          and([eb("state", "=", "submitting"), eb("updated_at", "<=", quietSince)]),
        ]),
      )
      .orderBy("created_at")
      .limit(50)
      .execute();
    for (const row of open) {
      if (row.state === "submitting") await this.resubmit(row);
      await this.finalize(row.id);
    }
    return open.length;
  }

  private async resubmit(row: {
    id: string;
    account_id: string;
    request: unknown;
    signature: string;
  }): Promise<void> {
    const request = requestFrom((row.request as { message?: Record<string, unknown> }).message);
    try {
      const { secret } = await this.enabledMerchant(row.account_id);
      const onChain = await this.vault.findWithdrawal(request);
      if (onChain.state === "landed") {
        await this.markSubmitted(row.id, { withdrawalId: onChain.id, txHash: null });
        return;
      }
      if (onChain.state === "usedByAnother") {
        await this.update(row.id, {
          state: "failed",
          error: "another withdrawal request used this request's nonce; nothing was debited for it",
        });
        return;
      }
      // Past its deadline the request can no longer land: the chain's word
      // that its nonce is unused is final.
      if ((await this.vault.chainTime()) > request.deadline) {
        await this.update(row.id, {
          state: "failed",
          error: "the request did not reach the chain before its deadline; nothing was debited",
        });
        return;
      }
      const sent = await this.vault.submitWithdraw({
        request,
        secret,
        signature: row.signature as Hex,
      });
      await this.markSubmitted(row.id, sent);
    } catch (e) {
      const error = storableError(e);
      this.log.warn({ err: error, id: row.id }, "could not submit a withdrawal again");
      await this.update(row.id, { error });
    }
  }

  private async markSubmitted(
    id: string,
    sent: { withdrawalId: bigint; txHash: Hex | null },
  ): Promise<void> {
    await this.update(id, {
      state: "debited",
      onchain_id: sent.withdrawalId.toString(),
      ...(sent.txHash ? { request_tx_hash: sent.txHash } : {}),
    });
  }

  /**
   * What the withdrawal address needs to cancel a withdrawal left
   * unfinalized for 24 hours (the debit is undone): the vault and the
   * withdrawal's id there, from which the wallet's side builds
   * `cancelWithdraw` itself; only when the vault would take it, 409 saying
   * why otherwise.
   */
  async cancellation(
    accountId: string,
    id: string,
  ): Promise<{ from: Hex; vault: Hex; withdrawalId: string }> {
    const { merchant } = await this.enabledMerchant(accountId);
    const row = await this.db
      .selectFrom("confidential_withdrawals")
      .select(["onchain_id"])
      .where("account_id", "=", accountId)
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) throw new ServiceError("not_found", "no withdrawal of yours has this id");
    if (row.onchain_id === null) {
      throw new ServiceError("conflict", "this withdrawal debited nothing on-chain");
    }
    const onchainId = BigInt(row.onchain_id);
    const [w, now] = await Promise.all([this.vault.withdrawal(onchainId), this.vault.chainTime()]);
    if (w.state !== "debited") {
      throw new ServiceError(
        "conflict",
        `this withdrawal is ${w.state}; there is nothing to cancel`,
      );
    }
    if (now < w.cancellableAt) {
      throw new ServiceError(
        "conflict",
        `cancellable from ${new Date(Number(w.cancellableAt) * 1000).toISOString()}, if it is not finalized by then`,
      );
    }
    return { from: merchant, vault: this.vault.address, withdrawalId: onchainId.toString() };
  }

  async list(accountId: string): Promise<WithdrawalListing[]> {
    const rows = await this.db
      .selectFrom("confidential_withdrawals")
      .selectAll()
      .where("account_id", "=", accountId)
      .orderBy("created_at", "desc")
      .limit(100)
      .execute();
    return rows.map(listing);
  }

  private async find(accountId: string, id: string): Promise<WithdrawalListing | undefined> {
    const row = await this.db
      .selectFrom("confidential_withdrawals")
      .selectAll()
      .where("account_id", "=", accountId)
      .where("id", "=", id)
      .executeTakeFirst();
    return row ? listing(row) : undefined;
  }

  private async finalize(id: string): Promise<void> {
    const row = await this.db
      .selectFrom("confidential_withdrawals")
      .select(["onchain_id", "state"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row || row.state !== "debited" || row.onchain_id === null) return;
    const onchainId = BigInt(row.onchain_id);
    try {
      // Idempotent: a withdrawal finalized or cancelled already answers its state.
      const done = await this.vault.finalizeWithdraw(onchainId);
      if (done.state === "cancelled") {
        await this.update(id, { state: "cancelled" });
        return;
      }
      if (done.state !== "finalized") return;
      await this.update(id, {
        state: "finalized",
        ...(done.txHash ? { finalize_tx_hash: done.txHash } : {}),
        paid_amount: (done.paid ? done.amount : 0n).toString(),
      });
    } catch (e) {
      // Stays debited: the next pass retries, and after 24 hours the
      // merchant's wallet may cancel on-chain instead.
      const error = storableError(e);
      this.log.warn({ err: error, id }, "could not finalize a confidential withdrawal");
      await this.update(id, { error });
    }
  }

  private async update(
    id: string,
    set: Partial<{
      state: WithdrawalState;
      onchain_id: string;
      request_tx_hash: string;
      finalize_tx_hash: string;
      paid_amount: string;
      error: string;
    }>,
  ): Promise<void> {
    await this.db
      .updateTable("confidential_withdrawals")
      .set({ ...set, updated_at: new Date() })
      .where("id", "=", id)
      .execute();
  }

  private async enabledMerchant(accountId: string) {
    const m = await this.merchants.find(accountId);
    if (!m || m.slot === null) {
      throw new ServiceError(
        "conflict",
        "enable confidential settlement (connect a withdrawal wallet) before withdrawing",
      );
    }
    const row = await this.db
      .selectFrom("confidential_merchants")
      .select("slot_secret")
      .where("account_id", "=", accountId)
      .executeTakeFirstOrThrow();
    if (!row.slot_secret) {
      throw new ServiceError(
        "conflict",
        "the slot's secret is missing; enable again to recover it",
      );
    }
    return { merchant: getAddress(m.merchant), slot: m.slot, secret: row.slot_secret as Hex };
  }
}

/** The request as the wallet signed it, from the typed data's message. */
function requestFrom(message: Record<string, unknown> | undefined): WithdrawRequest {
  const m = message ?? {};
  try {
    return {
      slot: BigInt(String(m["slot"])),
      to: getAddress(String(m["to"])),
      amount: parseAmount(String(m["amount"] ?? "")),
      nonce: BigInt(String(m["nonce"])),
      deadline: BigInt(String(m["deadline"])),
    };
  } catch (e) {
    if (e instanceof ServiceError) throw e;
    throw new ServiceError(
      "invalid_request",
      "typedData.message must hold slot, to, amount, nonce and deadline, as prepared by POST /api/confidential/withdrawals/request",
    );
  }
}

function parseAmount(v: string): bigint {
  if (!/^[1-9][0-9]{0,30}$/.test(v)) {
    throw new ServiceError(
      "invalid_request",
      "amount must be a positive whole number of atomic USDC units (1 USDC = 1000000)",
    );
  }
  return BigInt(v);
}

function listing(r: {
  id: string;
  onchain_id: string | null;
  amount: string;
  state: WithdrawalState;
  paid_amount: string | null;
  request_tx_hash: string | null;
  finalize_tx_hash: string | null;
  error: string | null;
  created_at: Date;
  updated_at: Date;
}): WithdrawalListing {
  return {
    id: r.id,
    onchainId: r.onchain_id,
    amount: r.amount,
    state: r.state,
    paidAmount: r.paid_amount,
    requestTransaction: r.request_tx_hash,
    finalizeTransaction: r.finalize_tx_hash,
    error: r.error,
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

/**
 * What a merchant may read (and the log may keep) of a failure: viem's
 * one-line summary, since its full message lists the call's arguments, the
 * slot's secret among them; URLs cut to their host, since an RPC URL may
 * carry the provider's key.
 */
function storableError(e: unknown): string {
  const text = e instanceof BaseError ? e.shortMessage : describeError(e);
  return redactUrls(text).slice(0, 500);
}
