/**
 * The confidential side of /verify and /settle: refuses what the offer rules
 * refuse, and once a confidential payment has settled, records its credit
 * (from the settlement record, never from the request) and answers with its
 * receipt (spec 4.6).
 *
 * Plain payments pass through untouched at the cost of one property read,
 * unless they pay the privacy contract itself.
 */
import { getAddress, isAddress, type Address, type Hex } from "../../chains/confidentialPort.js";
import type { SettleResponse } from "@x402/core/types";
import type { PaymentRequest } from "../../protocol/index.js";
import { ServiceError } from "../../lib/errors.js";
import type { Logger } from "../../lib/logger.js";
import type { ConfidentialCredits } from "./credits.js";
import type { ConfidentialMerchants, MerchantRecord } from "./merchants.js";
import {
  CONFIDENTIAL_REASONS,
  isConfidentialOffer,
  paysContract,
  refuseConfidential,
  type ContractFacts,
  type Refusal,
} from "./offerRules.js";

/** The key under `extensions` of a settle response that carries the receipt. */
const RECEIPT_EXTENSION = "confidential";

const MAX_CACHED_MERCHANTS = 10_000;

export class ConfidentialGate {
  private readonly enabled = new Map<string, MerchantRecord>();

  constructor(
    private readonly merchants: ConfidentialMerchants,
    private readonly credits: ConfidentialCredits | undefined,
    private readonly contract: ContractFacts | undefined,
    private readonly log: Logger,
  ) {}

  /** Whether this request concerns confidential settlement at all. */
  concerns(request: PaymentRequest): boolean {
    return isConfidentialOffer(request) || paysContract(request, this.contract);
  }

  async refusal(accountId: string, request: PaymentRequest): Promise<Refusal | undefined> {
    if (!this.concerns(request)) return undefined;
    const merchant = isConfidentialOffer(request) ? await this.merchantOf(accountId) : undefined;
    const refusal = refuseConfidential(request, this.contract, merchant);
    if (refusal || !isConfidentialOffer(request) || eip3009Authorization(request)) return refusal;
    return {
      reason: CONFIDENTIAL_REASONS.transferMethod,
      message:
        "a confidential payment is an EIP-3009 authorization (payload.authorization with from and nonce)",
    };
  }

  /**
   * Binds a confidential payment the gate let through to the account's
   * slot before the mechanism sends it: `collect` stores that commitment
   * in the same transaction that takes the money, so the merchant's
   * receipt opens it from the first moment. Without it nothing is sent.
   */
  async attribute(accountId: string, request: PaymentRequest): Promise<void> {
    const auth = eip3009Authorization(request);
    if (!this.credits || !auth || !isConfidentialOffer(request)) return;
    await unavailableOnError(() => this.credits!.attribute(accountId, auth.from, auth.nonce));
  }

  /**
   * The account's merchant record. Once its slot is assigned, the address and
   * the slot (all the offer rules read) can never change (a database trigger
   * refuses it), so that record is kept: a confidential /verify or /settle
   * then reads no database for it.
   */
  private async merchantOf(accountId: string): Promise<MerchantRecord | undefined> {
    const known = this.enabled.get(accountId);
    if (known) return known;
    const found = await unavailableOnError(() => this.merchants.find(accountId));
    if (found && found.slot !== null) {
      if (this.enabled.size >= MAX_CACHED_MERCHANTS) this.enabled.clear();
      this.enabled.set(accountId, found);
    }
    return found;
  }

  /** The settle answer with its receipt under `extensions`, when there is one. */
  async withReceipt(
    accountId: string,
    authorizationKey: string,
    request: PaymentRequest,
    result: SettleResponse,
  ): Promise<SettleResponse> {
    if (!result.success || !this.credits || !isConfidentialOffer(request)) return result;
    try {
      // Only now, after the mechanism verified and the commit recorded the
      // success as this account's: the credit comes from that record.
      await this.credits.recordSettled(authorizationKey, accountId);
      const receipt = await this.credits.receiptFor(authorizationKey, accountId);
      if (!receipt) return result;
      return { ...result, extensions: { ...result.extensions, [RECEIPT_EXTENSION]: receipt } };
    } catch (e) {
      // The payment did settle: the worker's sweep writes its credit and
      // signs its receipt from the settlement record, and the dashboard
      // lists it from then on.
      this.log.error(
        { err: String(e), authorizationKey },
        "could not record a confidential credit or sign its receipt; the sweep will",
      );
      return result;
    }
  }
}

/** The payload's EIP-3009 payer and nonce, when it is one (the gate refuses it otherwise). */
function eip3009Authorization(request: PaymentRequest): { from: Address; nonce: Hex } | undefined {
  const payload = request.paymentPayload.payload as { authorization?: unknown } | undefined;
  const auth = payload?.authorization as Record<string, unknown> | undefined;
  const from = auth?.["from"];
  const nonce = auth?.["nonce"];
  if (typeof from !== "string" || !isAddress(from, { strict: false })) return undefined;
  if (typeof nonce !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(nonce)) return undefined;
  return { from: getAddress(from), nonce: nonce.toLowerCase() as Hex };
}

/** A database that cannot answer is an outage: 503, never the payer's failure nor a 500. */
async function unavailableOnError<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (e) {
    throw new ServiceError(
      "service_unavailable",
      "confidential settlement's records could not be reached, so nothing was sent; retry shortly",
      { retryable: true, cause: e },
    );
  }
}
