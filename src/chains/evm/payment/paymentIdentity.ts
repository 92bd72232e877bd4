/**
 * What an EVM payload says about itself before anything is verified: who
 * pays, which signed authorization it carries, and how many quota units a
 * success costs. Pure functions over a payload whose shape payloadShape.ts
 * has checked (one authorization form, no unknown top-level field).
 *
 * The payer is the address the mechanism verifies a signature of, for the
 * branch it executes, never an address the payload merely names:
 * - `exact`/`upto` through Permit2: the permit's owner; through EIP-3009:
 *   the authorization's `from` (the shape check refuses both at once, so the
 *   branch read here is the one the mechanism takes);
 * - a batch-settlement `deposit`: the channel's payer, whose tokens the
 *   deposit moves under its own signature;
 * - a batch `settle`, `claim`, `refund` or `voucher`: nobody. They move what
 *   a channel already holds, on the receiver's word, so no payer's wallet or
 *   funds decide their outcome and nobody is cooled for them.
 *
 * The authorization key is what makes duplicates meet: every copy of one
 * on-chain authorization maps to the same key, whichever resource server or
 * replica sends it, and two different authorizations never share one.
 * - EIP-3009 (`exact` with USDC): the token, the payer and the 32-byte nonce,
 *   exactly what the token's `authorizationState` marks as used.
 * - Permit2 (`exact` through the proxy, `upto`, a batch deposit through the
 *   Permit2 collector): the owner and the Permit2 nonce; Permit2 nonces are
 *   per owner across every token and scheme.
 * - A batch deposit by EIP-3009: the channel and the deposit's salt (the
 *   escrow derives the token nonce from the two).
 * - A batch refund: the channel and its refund nonce; a batch claim: each
 *   claimed channel with the voucher total it claims up to.
 * - A batch `settle` has no authorization (it is repeatable): receiver and
 *   token.
 */
import { createHash } from "node:crypto";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import type { ChannelConfig } from "@x402/evm";
import { computeChannelId } from "@x402/evm/batch-settlement/client";
import { Reason } from "../../../protocol/reasons.js";
import { EvmReason } from "../reasons.js";

type Fields = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function inner(payload: PaymentPayload): Fields {
  const p = payload.payload as unknown;
  return typeof p === "object" && p !== null ? (p as Fields) : {};
}

export function evmPayerOf(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): string | undefined {
  const body = inner(payload);
  if (requirements.scheme === "batch-settlement") {
    return body["type"] === "deposit" ? str(fields(body["channelConfig"])["payer"]) : undefined;
  }
  // The mechanism takes the Permit2 branch whenever a permit is present.
  const permit2 = body["permit2Authorization"];
  if (permit2 !== undefined) return str(fields(permit2)["from"]);
  return str(fields(body["authorization"])["from"]);
}

function fields(v: unknown): Fields {
  return typeof v === "object" && v !== null ? (v as Fields) : {};
}

/**
 * A Permit2 nonce as the one number it is on-chain: the signed typed data
 * reads it with BigInt, so "1" and "01" are one nonce and must be one key.
 */
function canonicalNumber(n: string): string {
  return /^\d{1,78}$/.test(n) ? BigInt(n).toString() : n;
}

function permit2Key(network: string, permit2: unknown): string | undefined {
  const owner = str(fields(permit2)["from"]);
  const nonce = str(fields(permit2)["nonce"]);
  if (!owner || !nonce) return undefined;
  return `${network}:permit2:${owner}:${canonicalNumber(nonce)}`.toLowerCase();
}

export function evmAuthorizationKey(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): string | undefined {
  const network = requirements.network;
  const body = inner(payload);
  if (requirements.scheme === "batch-settlement") return batchKey(network, body);
  if (body["permit2Authorization"] !== undefined) {
    return permit2Key(network, body["permit2Authorization"]);
  }
  const auth = fields(body["authorization"]);
  const from = str(auth["from"]);
  const nonce = str(auth["nonce"]);
  if (from && nonce) {
    return `${network}:eip3009:${requirements.asset}:${from}:${nonce}`.toLowerCase();
  }
  return undefined;
}

/** The on-chain identity a batch-settlement operation consumes (see the header). */
function batchKey(network: string, body: Fields): string | undefined {
  const channelId = str(fields(body["voucher"])["channelId"]);
  switch (body["type"]) {
    case "deposit": {
      const authorization = fields(fields(body["deposit"])["authorization"]);
      if (authorization["permit2Authorization"] !== undefined) {
        return permit2Key(network, authorization["permit2Authorization"]);
      }
      const salt = str(fields(authorization["erc3009Authorization"])["salt"]);
      return channelId && salt
        ? `${network}:batch-deposit:${channelId}:${salt}`.toLowerCase()
        : undefined;
    }
    case "refund": {
      const refundNonce = str(body["refundNonce"]);
      return channelId && refundNonce
        ? `${network}:batch-refund:${channelId}:${canonicalNumber(refundNonce)}`.toLowerCase()
        : undefined;
    }
    case "claim": {
      const claims = Array.isArray(body["claims"]) ? body["claims"] : [];
      const parts: string[] = [];
      for (const claim of claims) {
        const c = fields(claim);
        const total = str(c["totalClaimed"]);
        const config = fields(fields(c["voucher"])["channel"]);
        if (!total) return undefined;
        parts.push(`${channelIdOf(config, network)}@${canonicalNumber(total)}`);
      }
      if (parts.length === 0) return undefined;
      // A claim of the same channels up to the same totals is one operation,
      // in whatever order its vouchers are listed.
      const digest = createHash("sha256").update(parts.sort().join(",")).digest("hex");
      return `${network}:batch-claim:${digest}`;
    }
    case "settle": {
      const receiver = str(body["receiver"]);
      const token = str(body["token"]);
      return receiver && token
        ? `${network}:batch-settle:${receiver}:${token}`.toLowerCase()
        : undefined;
    }
    default:
      return undefined;
  }
}

/** The channel's id as the escrow computes it; a config it cannot hash keys as its JSON. */
function channelIdOf(config: Fields, network: string): string {
  try {
    return computeChannelId(config as unknown as ChannelConfig, network).toLowerCase();
  } catch {
    return JSON.stringify(config);
  }
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
  if (body["permit2Authorization"]) return EvmReason.permit2InvalidNonce;
  if (body["authorization"]) return EvmReason.nonceAlreadyUsed;
  return Reason.duplicateSettlement;
}
