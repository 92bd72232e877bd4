/**
 * The answers a mechanism gives for a payment its own checks refused, the
 * same in every family whose checks end in `{ ok, reason, message, payer }`:
 * verify says `isValid: false` with the reason; settle says `success: false`
 * with it and no transaction (nothing was sent).
 */
import type { SettleResponse, VerifyResponse } from "@x402/core/types";

export interface Refusal {
  ok: false;
  reason: string;
  message: string;
  payer?: string | undefined;
}

export function verifyAnswer(checked: { ok: true; payer: string } | Refusal): VerifyResponse {
  return checked.ok
    ? { isValid: true, payer: checked.payer }
    : {
        isValid: false,
        invalidReason: checked.reason,
        invalidMessage: checked.message,
        ...(checked.payer ? { payer: checked.payer } : {}),
      };
}

export function refusedSettle(checked: Refusal, network: string): SettleResponse {
  return {
    success: false,
    errorReason: checked.reason,
    errorMessage: checked.message,
    transaction: "",
    network: network as SettleResponse["network"],
    ...(checked.payer ? { payer: checked.payer } : {}),
  };
}
