/**
 * Shape checks for EVM `exact` and `upto` payloads, so a malformed one gets a 400 that
 * names the field instead of an exception deep inside the mechanism.
 */
import { z } from "zod";
import { valueAt } from "../../lib/valueAt.js";

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, "must be a 0x-prefixed 20-byte address");
const uint = z.string().regex(/^\d{1,78}$/, "must be a string of digits");
// A Permit2 nonce is one number however it is written ("1", "01"); its
// canonical spelling is the only one taken, so copies of one payment meet.
const nonce = z
  .string()
  .regex(/^(0|[1-9]\d{0,77})$/, "must be a string of digits without leading zeros");
const hex = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, "must be 0x-prefixed hex bytes");

const eip3009 = z.object({
  signature: hex.min(4, "must not be empty"),
  authorization: z.object({
    from: address,
    to: address,
    value: uint,
    validAfter: uint,
    validBefore: uint,
    nonce: z.string().regex(/^0x[0-9a-fA-F]{64}$/, "must be a 0x-prefixed 32-byte hex nonce"),
  }),
});

const permit2 = z.object({
  signature: hex.min(4, "must not be empty"),
  permit2Authorization: z.object({
    from: address,
    permitted: z.object({ token: address, amount: uint }),
    spender: address,
    nonce,
    deadline: uint,
    witness: z.object({ to: address, validAfter: uint }).passthrough(),
  }),
});

/** Returns a message naming the first bad field, or undefined when the shape is fine. */
export function evmExactPayloadShapeError(payload: Record<string, unknown>): string | undefined {
  const schema =
    "permit2Authorization" in payload ? permit2 : "authorization" in payload ? eip3009 : undefined;
  if (!schema) {
    return "paymentPayload.payload must hold an `authorization` (EIP-3009) or a `permit2Authorization` (Permit2) with its `signature`";
  }
  return firstIssue(schema, payload);
}

/**
 * Upto payloads are always Permit2, and the witness names the facilitator
 * allowed to settle, so a missing `facilitator` is caught here as a 400
 * rather than surfacing as a failed signature check.
 */
const uptoPermit2 = permit2.extend({
  permit2Authorization: permit2.shape.permit2Authorization.extend({
    witness: z.object({ to: address, facilitator: address, validAfter: uint }).passthrough(),
  }),
});

/** Returns a message naming the first bad field of an `upto` payload, or undefined. */
export function evmUptoPayloadShapeError(payload: Record<string, unknown>): string | undefined {
  if (!("permit2Authorization" in payload)) {
    return "paymentPayload.payload must hold a `permit2Authorization` (Permit2) with its `signature` for the upto scheme";
  }
  return firstIssue(uptoPermit2, payload);
}

function firstIssue(schema: z.ZodTypeAny, payload: Record<string, unknown>): string | undefined {
  const r = schema.safeParse(payload);
  if (r.success) return undefined;
  const issue = r.error.issues[0]!;
  const path = ["paymentPayload", "payload", ...issue.path].join(".");
  return issue.code === "invalid_type" && valueAt(payload, issue.path) === undefined
    ? `${path} is required`
    : `${path} ${issue.message}`;
}
