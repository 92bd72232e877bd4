/**
 * What an EVM payload says about itself before anything is verified: who
 * pays, which signed authorization it carries, and how many quota units a
 * success costs. Pure functions over the payload's shape.
 *
 * The authorization key is what makes duplicates meet: every copy of one
 * signed authorization maps to the same key, whichever resource server or
 * replica sends it, and two different authorizations never share one.
 * - EIP-3009 (`exact` with USDC): the token, the payer and the 32-byte nonce,
 *   exactly what the token's `authorizationState` marks as used.
 * - Permit2 (`exact` through the proxy, and `upto`): the owner and the
 *   Permit2 nonce; Permit2 nonces are per owner across every token.
 * - Anything else (batch-settlement deposits, claims, refunds): undefined,
 *   and the service falls back to a hash of the whole payload.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { Reason } from "../../protocol/reasons.js";
import { EvmReason } from "./reasons.js";

type Fields = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function inner(payload: PaymentPayload): Fields {
  const p = payload.payload as unknown;
  return typeof p === "object" && p !== null ? (p as Fields) : {};
}

export function evmPayerOf(payload: PaymentPayload): string | undefined {
  const body = inner(payload);
  const auth = body["authorization"] as Fields | undefined;
  const fromAuth = str(auth?.["from"]);
  if (fromAuth) return fromAuth;
  const permit2 = body["permit2Authorization"] as Fields | undefined;
  return str(permit2?.["from"]);
}

/**
 * A Permit2 nonce as the one number it is on-chain: the signed typed data
 * reads it with BigInt, so "1" and "01" are one nonce and must be one key.
 */
function canonicalNumber(n: string): string {
  return /^\d{1,78}$/.test(n) ? BigInt(n).toString() : n;
}

export function evmAuthorizationKey(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): string | undefined {
  const network = requirements.network;
  const body = inner(payload);
  const auth = body["authorization"] as Fields | undefined;
  const from = str(auth?.["from"]);
  const nonce = str(auth?.["nonce"]);
  if (from && nonce) {
    return `${network}:eip3009:${requirements.asset}:${from}:${nonce}`.toLowerCase();
  }
  const permit2 = body["permit2Authorization"] as Fields | undefined;
  const owner = str(permit2?.["from"]);
  const permitNonce = str(permit2?.["nonce"]);
  if (owner && permitNonce) {
    return `${network}:permit2:${owner}:${canonicalNumber(permitNonce)}`.toLowerCase();
  }
  return undefined;
}

/**
 * Quota units a success costs (spec section 8): for `batch-settlement`, one
 * per voucher claimed, by a `claim` or by the claims a `refund` carries
 * (the refund itself, a `deposit` and a `settle` cost none); one for
 * everything else.
 */
export function evmQuotaUnits(payload: PaymentPayload, requirements: PaymentRequirements): number {
  if (requirements.scheme !== "batch-settlement") return 1;
  const body = inner(payload);
  const type = body["type"];
  if (type === "claim" || type === "refund") {
    const claims = body["claims"];
    return Array.isArray(claims) ? claims.length : 0;
  }
  if (type === "deposit" || type === "settle") return 0;
  return 1;
}

/**
 * A batch-settlement `settle` pays a receiver what its claims left in the
 * escrow, and anyone may call it whenever more is claimed: its payload
 * (`type`, `receiver`, `token`) is the same each time, with no nonce.
 */
export function evmRepeatable(payload: PaymentPayload, requirements: PaymentRequirements): boolean {
  return requirements.scheme === "batch-settlement" && inner(payload)["type"] === "settle";
}

/**
 * The reason a settle of a consumed authorization gets, as the reference
 * mechanisms answer a replay: EIP-3009's nonce-used reason, Permit2's
 * invalid-nonce reason, and `duplicate_settlement` for batch payloads.
 */
export function evmReplayReason(payload: PaymentPayload): string {
  const body = inner(payload);
  if (body["authorization"]) return EvmReason.nonceAlreadyUsed;
  if (body["permit2Authorization"]) return EvmReason.permit2InvalidNonce;
  return Reason.duplicateSettlement;
}
