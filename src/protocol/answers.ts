/**
 * The answers to a refused or unfinished payment, built in one place for
 * every site that gives one (the protocol checks, the families' mechanisms,
 * the settle stages, duplicates): verify says `isValid: false` with the
 * reason; settle says `success: false` with it and an empty `transaction`
 * (nothing was sent, or nothing this request may be answered with), except
 * `settlement_pending`, which names the transaction being followed, the one
 * case a resource server retries.
 */
import type { SettleResponse, VerifyResponse } from "@x402/core/types";
import { Reason } from "./reasons.js";

export interface Refusal {
  ok: false;
  reason: string;
  message: string;
  payer?: string | undefined;
}

function who(payer: string | undefined): { payer?: string } {
  return payer ? { payer } : {};
}

/** `isValid: false` with the reason. */
export function verifyRefusal(refusal: Omit<Refusal, "ok">): VerifyResponse {
  return {
    isValid: false,
    invalidReason: refusal.reason,
    invalidMessage: refusal.message,
    ...who(refusal.payer),
  };
}

/** `success: false` with the reason and no transaction. */
export function settleRefusal(refusal: Omit<Refusal, "ok">, network: string): SettleResponse {
  return {
    success: false,
    errorReason: refusal.reason,
    errorMessage: refusal.message,
    transaction: "",
    network: network as SettleResponse["network"],
    ...who(refusal.payer),
  };
}

/** Sent and not final yet: `settlement_pending` with the transaction being followed. */
export function settlePending(
  transaction: string,
  network: string,
  message: string,
  payer: string | undefined,
): SettleResponse {
  return {
    success: false,
    errorReason: Reason.settlementPending,
    errorMessage: message,
    transaction,
    network: network as SettleResponse["network"],
    ...who(payer),
  };
}

/** A family's check as a verify answer: valid with its payer, or the refusal. */
export function verifyAnswer(checked: { ok: true; payer: string } | Refusal): VerifyResponse {
  return checked.ok ? { isValid: true, payer: checked.payer } : verifyRefusal(checked);
}

/** A family's refused check as a settle answer. */
export function refusedSettle(checked: Refusal, network: string): SettleResponse {
  return settleRefusal(checked, network);
}
