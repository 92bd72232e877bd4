/**
 * What a Starknet `exact` payload says, checked without the chain.
 *
 * Wire shape (the x402 foundation's): `payload = { from, outsideExecution:
 * { typedData, signature } }`, where `typedData` is the SNIP-12 revision 1
 * `OutsideExecution` of SNIP-9 v2 (domain `Account.execute_from_outside`,
 * version `2`) and `signature` the felt array passed verbatim to the
 * account's `is_valid_signature`.
 *
 * The client's JSON is never hashed: the canonical typed data is rebuilt
 * from the message's five values and the network's chain id, and a payload
 * whose JSON differs from it in anything but felt spelling is refused.
 * Felts and addresses are compared as numbers (padding and case vary).
 *
 * Time window, with `skewSeconds` of tolerance for a sequencer whose block
 * timestamp lags the wall clock (the account checks `Execute After <
 * block timestamp < Execute Before`):
 * - `Execute After` must lie at least `skewSeconds` in the past;
 * - `Execute Before` must leave at least `skewSeconds` to settle in, and lie
 *   no further ahead than `maxTimeoutSeconds + skewSeconds`.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  OutsideExecutionTypesV2,
  TypedDataRevision,
  hash,
  shortString,
  typedData,
  type TypedData,
} from "starknet";
import { Reason } from "../../protocol/reasons.js";
import { StarknetReason } from "./reasons.js";

/** The SNIP-9 wildcard caller (`'ANY_CALLER'`): never acceptable for a bound payment. */
export const ANY_CALLER = 0x414e595f43414c4c4552n;
const TRANSFER_SELECTOR = BigInt(hash.getSelectorFromName("transfer"));
export const TRANSFER_EVENT_KEY = BigInt(hash.getSelectorFromName("Transfer"));
/** `is_valid_signature`'s success: 'VALID' (SNIP-6); some older accounts answer 1. */
export const SIGNATURE_VALID = 0x56414c4944n;

const FELT_PRIME = 2n ** 251n + 17n * 2n ** 192n + 1n;
const U128 = 1n << 128n;
/** Longest signature passed to an account (multisig and guardian accounts send more than 2). */
const MAX_SIGNATURE_FELTS = 32;

interface OutsideCall {
  to: bigint;
  selector: bigint;
  calldata: bigint[];
}

/** A payload's outside execution, its values as numbers. */
export interface ParsedOutsideExecution {
  from: bigint;
  chainId: bigint;
  caller: bigint;
  nonce: bigint;
  executeAfter: bigint;
  executeBefore: bigint;
  calls: OutsideCall[];
  signature: bigint[];
  /** The canonical typed data, rebuilt from the values above: what is hashed. */
  typedData: TypedData;
}

export type Checked =
  | { ok: true; oe: ParsedOutsideExecution; payer: string }
  | { ok: false; reason: string; message: string; payer?: string };

export const feltHex = (v: bigint): string => `0x${v.toString(16)}`;
/** An address as the service records it: 0x and 64 lower-case hex digits. */
export const addressHex = (v: bigint): string => `0x${v.toString(16).padStart(64, "0")}`;

/** A felt from JSON: hex (≤ 64 digits), decimal (≤ 78 digits) or a safe non-negative integer. */
export function parseFelt(v: unknown): bigint | undefined {
  let n: bigint;
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v) || v < 0) return undefined;
    n = BigInt(v);
  } else if (typeof v === "string" && /^0x[0-9a-fA-F]{1,64}$/.test(v)) {
    n = BigInt(v);
  } else if (typeof v === "string" && /^\d{1,78}$/.test(v)) {
    n = BigInt(v);
  } else {
    return undefined;
  }
  return n < FELT_PRIME ? n : undefined;
}

/** A chain id as a felt: hex, decimal or the short string itself (`SN_MAIN`). */
function parseChainId(v: unknown): bigint | undefined {
  if (typeof v !== "string" || v.length > 66) return undefined;
  const felt = parseFelt(v);
  if (felt !== undefined) return felt;
  return /^[\x20-\x7e]{1,31}$/.test(v) ? BigInt(shortString.encodeShortString(v)) : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The canonical SNIP-12 revision 1 typed data of a SNIP-9 v2 outside execution. */
function canonicalTypedData(
  chainId: bigint,
  oe: Pick<ParsedOutsideExecution, "caller" | "nonce" | "executeAfter" | "executeBefore" | "calls">,
): TypedData {
  return {
    types: OutsideExecutionTypesV2,
    primaryType: "OutsideExecution",
    domain: {
      name: "Account.execute_from_outside",
      version: "2",
      chainId: feltHex(chainId),
      revision: "1",
    },
    message: {
      Caller: feltHex(oe.caller),
      Nonce: feltHex(oe.nonce),
      "Execute After": feltHex(oe.executeAfter),
      "Execute Before": feltHex(oe.executeBefore),
      Calls: oe.calls.map((c) => ({
        To: feltHex(c.to),
        Selector: feltHex(c.selector),
        Calldata: c.calldata.map(feltHex),
      })),
    },
  };
}

/** SNIP-12 hashes already computed, by payload body (see `signedMessageHash`). */
const signedHashes = new WeakMap<object, string>();

/**
 * The SNIP-12 hash the payer signed: of the canonical typed data of `oe`,
 * parsed from `payload`. Computed once per payload: a request's
 * authorization key and its check both need it, and its Poseidon hashing in
 * JavaScript was a large share of a settle's CPU.
 */
export function signedMessageHash(
  payload: PaymentPayload,
  oe: Omit<ParsedOutsideExecution, "typedData" | "signature">,
): string {
  const body = payload.payload as object;
  const known = signedHashes.get(body);
  if (known !== undefined) return known;
  const td = canonicalTypedData(oe.chainId, oe);
  const signed = hash.computePoseidonHashOnElements([
    STARKNET_MESSAGE,
    domainHash(oe.chainId, td),
    addressHex(oe.from),
    typedData.getStructHash(td.types, td.primaryType, td.message, TypedDataRevision.ACTIVE),
  ]);
  signedHashes.set(body, signed);
  return signed;
}

/** SNIP-12's prefix of every message hash. */
const STARKNET_MESSAGE = shortString.encodeShortString("StarkNet Message");
/** SNIP-12 struct hashes of the outside-execution domain, by chain id (a few at most). */
const domainHashes = new Map<bigint, string>();

/**
 * The struct hash of the domain, which depends on the chain id alone:
 * hashed once per chain instead of for every payment (a fifth of the
 * message hash's Poseidon work). Only a handful of chain ids are kept, as a
 * payload may name any.
 */
function domainHash(chainId: bigint, td: TypedData): string {
  const known = domainHashes.get(chainId);
  if (known !== undefined) return known;
  const computed = typedData.getStructHash(
    td.types,
    "StarknetDomain",
    td.domain,
    TypedDataRevision.ACTIVE,
  );
  if (domainHashes.size < 8) domainHashes.set(chainId, computed);
  return computed;
}

/** The payer a payload names (as claimed), padded, or undefined. */
export function payerOf(payload: PaymentPayload): string | undefined {
  const from = parseFelt((payload.payload as Record<string, unknown> | undefined)?.["from"]);
  return from === undefined || from === 0n ? undefined : addressHex(from);
}

/**
 * Parses the payload into numbers and the canonical typed data, or names
 * what is malformed. Shape only: whether the values fit the requirements is
 * `checkOutsideExecution`'s job.
 */
export function parseOutsideExecution(
  payload: PaymentPayload,
): { ok: true; oe: Omit<ParsedOutsideExecution, "typedData"> } | { ok: false; message: string } {
  const body = payload.payload as Record<string, unknown> | undefined;
  const bad = (message: string) => ({ ok: false as const, message });
  const from = parseFelt(body?.["from"]);
  if (from === undefined || from === 0n) {
    return bad("paymentPayload.payload.from must be the payer's account address (a felt)");
  }
  const outside = body?.["outsideExecution"];
  if (!isObject(outside)) {
    return bad("paymentPayload.payload.outsideExecution must be { typedData, signature }");
  }
  const sig = outside["signature"];
  if (!Array.isArray(sig) || sig.length === 0 || sig.length > MAX_SIGNATURE_FELTS) {
    return bad(
      `paymentPayload.payload.outsideExecution.signature must be an array of 1 to ${MAX_SIGNATURE_FELTS} felts`,
    );
  }
  const signature = sig.map(parseFelt);
  if (signature.some((s) => s === undefined)) {
    return bad("paymentPayload.payload.outsideExecution.signature must hold felts (hex strings)");
  }
  const td = outside["typedData"];
  if (!isObject(td) || !isObject(td["domain"]) || !isObject(td["message"])) {
    return bad(
      "paymentPayload.payload.outsideExecution.typedData must be SNIP-12 typed data with domain and message",
    );
  }
  const chainId = parseChainId(td["domain"]["chainId"]);
  if (chainId === undefined) {
    return bad(
      "outsideExecution.typedData.domain.chainId must be a chain id such as 0x534e5f4d41494e",
    );
  }
  const m = td["message"];
  const fields = {
    caller: parseFelt(m["Caller"]),
    nonce: parseFelt(m["Nonce"]),
    executeAfter: parseFelt(m["Execute After"]),
    executeBefore: parseFelt(m["Execute Before"]),
  };
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) {
      return bad(`outsideExecution.typedData.message is missing a felt ${name}`);
    }
  }
  if (fields.executeAfter! >= U128 || fields.executeBefore! >= U128) {
    return bad("outsideExecution.typedData.message time bounds must be u128");
  }
  const rawCalls = m["Calls"];
  if (!Array.isArray(rawCalls) || rawCalls.length > 8) {
    return bad("outsideExecution.typedData.message.Calls must be an array of calls");
  }
  const calls: OutsideCall[] = [];
  for (const c of rawCalls) {
    if (!isObject(c) || !Array.isArray(c["Calldata"]) || c["Calldata"].length > 64) {
      return bad("each outside call must be { To, Selector, Calldata }");
    }
    const to = parseFelt(c["To"]);
    const selector = parseFelt(c["Selector"]);
    const calldata = (c["Calldata"] as unknown[]).map(parseFelt);
    if (to === undefined || selector === undefined || calldata.some((d) => d === undefined)) {
      return bad("each outside call's To, Selector and Calldata must be felts");
    }
    calls.push({ to, selector, calldata: calldata as bigint[] });
  }
  return {
    ok: true,
    oe: {
      from,
      chainId,
      caller: fields.caller!,
      nonce: fields.nonce!,
      executeAfter: fields.executeAfter!,
      executeBefore: fields.executeBefore!,
      calls,
      signature: signature as bigint[],
    },
  };
}

/** Whether the client's typed data is the canonical one but for felt spelling. */
function sameTypedData(sent: Record<string, unknown>, canonical: TypedData): boolean {
  const norm = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(norm);
    if (isObject(v)) {
      return Object.fromEntries(
        Object.keys(v)
          .sort()
          .map((k) => [k, norm(v[k])]),
      );
    }
    const felt = parseFelt(v);
    return felt !== undefined ? `felt:${felt}` : v;
  };
  const domain = sent["domain"] as Record<string, unknown>;
  const sentChain = parseChainId(domain["chainId"]);
  const comparable = {
    ...sent,
    domain: {
      ...domain,
      chainId: sentChain === undefined ? domain["chainId"] : feltHex(sentChain),
    },
  };
  return JSON.stringify(norm(comparable)) === JSON.stringify(norm(canonical));
}

/**
 * The SNIP-9 `Caller` the requirements bind, in either of two spellings
 * that mean the same thing: `extra.feePayer` (this service's specification,
 * and the foundation's amendment under review) or `extra.caller` (the
 * foundation's merged Starknet scheme), each naming the executor that will
 * call `execute_from_outside_v2` and pay its fee. `extra.areFeesSponsored`
 * comes with `caller` in the merged scheme: absent it means sponsored, and
 * `false` (an unsponsored flow no one has specified) is refused. A payload
 * signed for one spelling therefore settles under the other when both name
 * the same executor.
 */
function boundCaller(
  extra: Record<string, unknown> | undefined,
  payer: bigint,
  executors: ReadonlySet<bigint>,
):
  | { ok: true; caller: bigint; field: "feePayer" | "caller" }
  | { ok: false; reason: string; message: string } {
  const sponsored = extra?.["areFeesSponsored"];
  if (sponsored !== undefined && sponsored !== true) {
    return {
      ok: false,
      reason: Reason.invalidPaymentRequirements,
      message:
        "paymentRequirements.extra.areFeesSponsored must be true (or absent): this facilitator settles Starknet payments only with its executors paying the fee",
    };
  }
  const given = { feePayer: extra?.["feePayer"], caller: extra?.["caller"] };
  const feePayer = given.feePayer === undefined ? undefined : parseFelt(given.feePayer);
  const caller = given.caller === undefined ? undefined : parseFelt(given.caller);
  const field = given.feePayer !== undefined ? "feePayer" : "caller";
  // Each form keeps its own reason: the one its specification names.
  const reason = field === "feePayer" ? StarknetReason.feePayer : StarknetReason.caller;
  if ((given.feePayer !== undefined && !feePayer) || (given.caller !== undefined && !caller)) {
    return {
      ok: false,
      reason,
      message: `paymentRequirements.extra.${given.feePayer !== undefined && !feePayer ? "feePayer" : "caller"} must be an executor's address (a non-zero felt): copy it from GET /supported`,
    };
  }
  if (feePayer !== undefined && caller !== undefined && feePayer !== caller) {
    return {
      ok: false,
      reason: Reason.invalidPaymentRequirements,
      message:
        "paymentRequirements.extra.feePayer and extra.caller name different accounts; they mean the same executor, so give one or give both alike",
    };
  }
  const bound = feePayer ?? caller;
  if (bound === undefined) {
    return {
      ok: false,
      reason: StarknetReason.feePayer,
      message:
        "paymentRequirements.extra.feePayer (or extra.caller with areFeesSponsored: true) is required on Starknet: copy it verbatim from GET /supported",
    };
  }
  if (bound === ANY_CALLER || bound === payer) {
    return {
      ok: false,
      reason,
      message: `paymentRequirements.extra.${field} must be one of this facilitator's executors, never ANY_CALLER or the payer`,
    };
  }
  if (!executors.has(bound)) {
    return {
      ok: false,
      reason,
      message: `paymentRequirements.extra.${field} ${addressHex(bound)} is not an executor of this facilitator: copy it from GET /supported`,
    };
  }
  return { ok: true, caller: bound, field };
}

export interface CheckSettings {
  /** `starknet_chainId` of the network, as a hex felt. */
  chainId: string;
  /** Our executor accounts: the only acceptable `Caller`s. */
  executors: ReadonlySet<bigint>;
  skewSeconds: number;
  nowSeconds: number;
}

/** Every check of a payload against the requirements that needs no chain. */
export function checkOutsideExecution(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  s: CheckSettings,
): Checked {
  const parsed = parseOutsideExecution(payload);
  if (!parsed.ok) return { ok: false, reason: StarknetReason.payload, message: parsed.message };
  const p = parsed.oe;
  const payer = addressHex(p.from);
  const fail = (reason: string, message: string): Checked => ({
    ok: false,
    reason,
    message,
    payer,
  });

  const bound = boundCaller(requirements.extra, p.from, s.executors);
  if (!bound.ok) return fail(bound.reason, bound.message);
  // The client's echo of the requirements, refused on its own (as the merged scheme asks).
  const echoed = payload.accepted?.extra as Record<string, unknown> | undefined;
  if (echoed !== undefined && "areFeesSponsored" in echoed && echoed["areFeesSponsored"] !== true) {
    return fail(
      Reason.invalidPayload,
      "paymentPayload.accepted.extra.areFeesSponsored must be true when present: only sponsored Starknet payments are settled",
    );
  }
  const feePayer = bound.caller;
  const amount = /^\d{1,78}$/.test(requirements.amount) ? BigInt(requirements.amount) : undefined;
  const asset = parseFelt(requirements.asset);
  const payTo = parseFelt(requirements.payTo);
  if (amount === undefined || amount >= U128 * U128 || asset === undefined || payTo === undefined) {
    return fail(
      Reason.invalidPaymentRequirements,
      "paymentRequirements.amount must be a base-10 integer, and asset and payTo Starknet addresses",
    );
  }

  const chainId = BigInt(s.chainId);
  if (p.chainId !== chainId) {
    return fail(
      StarknetReason.chainId,
      `outsideExecution.typedData.domain.chainId must be ${s.chainId} for ${requirements.network}`,
    );
  }
  const typedData = canonicalTypedData(chainId, p);
  const outside = (payload.payload as Record<string, unknown>)["outsideExecution"] as Record<
    string,
    unknown
  >;
  if (!sameTypedData(outside["typedData"] as Record<string, unknown>, typedData)) {
    return fail(
      StarknetReason.typedData,
      "outsideExecution.typedData is not the SNIP-12 revision 1 OutsideExecution of SNIP-9 v2 (domain Account.execute_from_outside, version 2): its types, domain or fields differ",
    );
  }
  if (p.caller !== feePayer) {
    return fail(
      StarknetReason.caller,
      `the outside execution's Caller must be extra.${bound.field} (${addressHex(feePayer)})`,
    );
  }
  const call = p.calls[0];
  if (p.calls.length !== 1 || !call) {
    return fail(StarknetReason.calls, "the outside execution must hold exactly one call");
  }
  if (call.to !== asset) {
    return fail(StarknetReason.asset, `the call must be to the asset ${requirements.asset}`);
  }
  if (call.selector !== TRANSFER_SELECTOR || call.calldata.length !== 3) {
    return fail(StarknetReason.calls, "the call must be transfer(recipient, amount as u256)");
  }
  const [recipient, low, high] = call.calldata as [bigint, bigint, bigint];
  if (low >= U128 || high >= U128) {
    return fail(StarknetReason.amount, "each u256 limb of the amount must be below 2^128");
  }
  if (recipient !== payTo) {
    return fail(StarknetReason.recipient, `the transfer must be to payTo ${requirements.payTo}`);
  }
  if (low + high * U128 !== amount) {
    return fail(StarknetReason.amount, `the transfer must be of exactly ${requirements.amount}`);
  }
  const now = BigInt(s.nowSeconds);
  const skew = BigInt(s.skewSeconds);
  if (p.executeAfter >= now - skew) {
    return fail(
      StarknetReason.executeAfter,
      `Execute After must lie at least ${s.skewSeconds} s in the past (1 is usual)`,
    );
  }
  if (p.executeBefore <= now + skew) {
    return fail(
      StarknetReason.expired,
      `the outside execution expires too soon to settle (Execute Before must be more than ${s.skewSeconds} s ahead)`,
    );
  }
  if (p.executeBefore > now + BigInt(requirements.maxTimeoutSeconds) + skew) {
    return fail(
      StarknetReason.windowTooLong,
      "Execute Before lies further ahead than maxTimeoutSeconds allows",
    );
  }
  return { ok: true, payer, oe: { ...p, typedData } };
}
