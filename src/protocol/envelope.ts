/**
 * The shape of a /verify or /settle body, checked before any work is done.
 * Scheme-specific payload shapes are checked by the chain family (through the
 * payment service); this covers the protocol envelope of x402 v2.
 */
import { z } from "zod";
import { valueAt } from "../lib/valueAt.js";
import type { PaymentRequest } from "./index.js";

const UINT256_MAX = (1n << 256n) - 1n;

const caip2 = z
  .string()
  .regex(/^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/, "must be a CAIP-2 network id such as eip155:8453");

/**
 * Whole smallest units, or a decimal value: which one a network takes is its
 * chain family's to say (issued currencies on the XRP Ledger are decimal),
 * and the family's shape check refuses the other.
 */
const amountText = z
  .string()
  .regex(
    /^\d{1,78}(\.\d{1,40})?$/,
    "must be a string of digits: the amount in the token's smallest unit",
  )
  // zod runs every check even after the regex fails, so guard the BigInt.
  .refine((v) => !/^\d{1,78}$/.test(v) || BigInt(v) <= UINT256_MAX, "is larger than a uint256");

// Addresses and asset ids on every supported chain family (hex, base58,
// NEAR account ids, XRPL r-addresses) are printable ASCII; anything else,
// control characters and NUL above all, is refused before it reaches storage.
const addressLike = z
  .string()
  .regex(/^[\x21-\x7e]{1,256}$/, "must be an address or token id of 1 to 256 printable characters");

const requirements = z.object({
  scheme: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be a scheme name such as exact"),
  network: caip2,
  asset: addressLike,
  amount: amountText,
  payTo: addressLike,
  maxTimeoutSeconds: z.number().int().min(0).max(31_536_000),
  extra: z.record(z.string(), z.unknown()).optional(),
});

const payload = z.object({
  x402Version: z.number().int(),
  accepted: requirements,
  payload: z.record(z.string(), z.unknown()),
  resource: z.record(z.string(), z.unknown()).optional(),
  extensions: z.record(z.string(), z.unknown()).optional(),
});

/** Also the OpenAPI description of the /verify and /settle bodies (http/openapi.ts). */
export const paymentRequestBody = z.object({
  x402Version: z.number().int(),
  paymentPayload: payload,
  paymentRequirements: requirements,
});

export type ParsedBody =
  | { kind: "ok"; request: PaymentRequest }
  | { kind: "wrong_version"; request: unknown }
  | { kind: "invalid"; message: string };

function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}

export function parsePaymentRequestBody(raw: unknown): ParsedBody {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return {
      kind: "invalid",
      message:
        "the body must be a JSON object with x402Version, paymentPayload and paymentRequirements",
    };
  }
  const parsed = paymentRequestBody.safeParse(raw);
  if (parsed.success) return { kind: "ok", request: parsed.data as unknown as PaymentRequest };
  // A different protocol version has a different shape: answer with the
  // version problem rather than a list of shape errors it cannot fix.
  const r = raw as Record<string, unknown>;
  const inner = r["paymentPayload"] as Record<string, unknown> | undefined;
  if (
    (isInt(r["x402Version"]) && r["x402Version"] !== 2) ||
    (isInt(inner?.["x402Version"]) && inner?.["x402Version"] !== 2)
  ) {
    return { kind: "wrong_version", request: raw };
  }
  const issue = parsed.error.issues[0]!;
  const path = issue.path.join(".") || "body";
  const message =
    issue.code === "invalid_type" && valueAt(raw, issue.path) === undefined
      ? `${path} is required`
      : issue.code === "invalid_type"
        ? `${path} must be ${issue.expected === "record" ? "an object" : `a ${issue.expected}`}`
        : `${path} ${issue.message}`;
  return { kind: "invalid", message };
}
