/**
 * Shape checks for EVM payloads of every scheme, so a malformed one gets a
 * 400 that names the field instead of an exception deep inside the mechanism.
 *
 * The top level of each payload is strict: a field the mechanism does not
 * read is refused, and so is a payload carrying both authorization forms.
 * The payer and the authorization key are read from the payload before the
 * mechanism runs (paymentIdentity.ts); with one form only, and nothing
 * beside it, what they read is what the mechanism verifies and executes.
 */
import { z } from "zod";
import { valueAt } from "../../../lib/valueAt.js";

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, "must be a 0x-prefixed 20-byte address");
const uint = z.string().regex(/^\d{1,78}$/, "must be a string of digits");
// A Permit2 nonce is one number however it is written ("1", "01"); its
// canonical spelling is the only one taken, so copies of one payment meet.
const nonce = z
  .string()
  .regex(/^(0|[1-9]\d{0,77})$/, "must be a string of digits without leading zeros");
const hex = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, "must be 0x-prefixed hex bytes");

const bytes32 = z.string().regex(/^0x[0-9a-fA-F]{64}$/, "must be a 0x-prefixed 32-byte hex value");

const eip3009 = z.strictObject({
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

const permit2Fields = {
  from: address,
  permitted: z.object({ token: address, amount: uint }),
  spender: address,
  nonce,
  deadline: uint,
};

const permit2 = z.strictObject({
  signature: hex.min(4, "must not be empty"),
  permit2Authorization: z.object({
    ...permit2Fields,
    witness: z.object({ to: address, validAfter: uint }).passthrough(),
  }),
});

const BOTH_FORMS =
  "paymentPayload.payload must hold one authorization form: an `authorization` (EIP-3009) or a `permit2Authorization` (Permit2), not both";

/** Returns a message naming the first bad field, or undefined when the shape is fine. */
export function evmExactPayloadShapeError(payload: Record<string, unknown>): string | undefined {
  if ("permit2Authorization" in payload && "authorization" in payload) return BOTH_FORMS;
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
  if ("authorization" in payload) return BOTH_FORMS;
  return firstIssue(uptoPermit2, payload);
}

const channelConfig = z
  .object({
    payer: address,
    payerAuthorizer: address,
    receiver: address,
    receiverAuthorizer: address,
    token: address,
    withdrawDelay: z.number().int().nonnegative(),
    salt: bytes32,
  })
  .passthrough();

const voucherFields = z
  .object({ channelId: bytes32, maxClaimableAmount: uint, signature: hex })
  .passthrough();

const voucherClaim = z
  .object({
    voucher: z.object({ channel: channelConfig, maxClaimableAmount: uint }).passthrough(),
    signature: hex,
    totalClaimed: uint,
  })
  .passthrough();

const depositAuthorization = z.union([
  z.strictObject({
    erc3009Authorization: z
      .object({ validAfter: uint, validBefore: uint, salt: bytes32, signature: hex })
      .passthrough(),
  }),
  z.strictObject({
    permit2Authorization: z
      .object({
        ...permit2Fields,
        witness: z.object({ channelId: bytes32 }).passthrough(),
        signature: hex,
      })
      .passthrough(),
  }),
]);

/** One strict schema per batch-settlement operation, by its `type`. */
const BATCH_SHAPES: Record<string, z.ZodTypeAny> = {
  deposit: z.strictObject({
    type: z.literal("deposit"),
    channelConfig,
    voucher: voucherFields,
    deposit: z.strictObject({ amount: uint, authorization: depositAuthorization }),
  }),
  voucher: z.strictObject({
    type: z.literal("voucher"),
    channelConfig,
    voucher: voucherFields,
  }),
  refund: z.strictObject({
    type: z.literal("refund"),
    channelConfig,
    voucher: voucherFields,
    amount: uint.optional(),
    refundNonce: uint.optional(),
    claims: z.array(voucherClaim).optional(),
    refundAuthorizerSignature: hex.optional(),
    claimAuthorizerSignature: hex.optional(),
  }),
  claim: z.strictObject({
    type: z.literal("claim"),
    claims: z.array(voucherClaim).min(1, "must hold at least one claim"),
    claimAuthorizerSignature: hex.optional(),
  }),
  settle: z.strictObject({ type: z.literal("settle"), receiver: address, token: address }),
};

/** Returns a message naming the first bad field of a `batch-settlement` payload, or undefined. */
export function evmBatchPayloadShapeError(payload: Record<string, unknown>): string | undefined {
  const type = payload["type"];
  const schema = typeof type === "string" ? BATCH_SHAPES[type] : undefined;
  if (!schema) {
    return `paymentPayload.payload.type must be one of ${Object.keys(BATCH_SHAPES).join(", ")} for the batch-settlement scheme`;
  }
  const issue = firstIssue(schema, payload);
  if (issue) return issue;
  // A Permit2 deposit moves the channel payer's tokens only when the permit is theirs.
  const deposit = BATCH_SHAPES.deposit!.safeParse(payload);
  if (deposit.success) {
    const d = deposit.data as {
      channelConfig: { payer: string };
      deposit: { authorization: { permit2Authorization?: { from: string } } };
    };
    const from = d.deposit.authorization.permit2Authorization?.from;
    if (from !== undefined && from.toLowerCase() !== d.channelConfig.payer.toLowerCase()) {
      return "paymentPayload.payload.deposit.authorization.permit2Authorization.from must be paymentPayload.payload.channelConfig.payer";
    }
  }
  return undefined;
}

function firstIssue(schema: z.ZodTypeAny, payload: Record<string, unknown>): string | undefined {
  const r = schema.safeParse(payload);
  if (r.success) return undefined;
  const issue = r.error.issues[0]!;
  const path = ["paymentPayload", "payload", ...issue.path].join(".");
  if (issue.code === "unrecognized_keys") {
    const names = issue.keys.map((k) => `${path}.${k}`).join(", ");
    return `${names} ${issue.keys.length > 1 ? "are not fields" : "is not a field"} of this payment form: a payload carries exactly the fields its scheme signs and executes`;
  }
  return issue.code === "invalid_type" && valueAt(payload, issue.path) === undefined
    ? `${path} is required`
    : `${path} ${issue.message}`;
}
