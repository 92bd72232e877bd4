/**
 * The NEAR `exact` payload, checked offline: `payload.signedDelegateAction`
 * is a base64 Borsh NEP-366 `SignedDelegate` whose one action is an
 * `ft_transfer` of exactly the amount to `payTo` on the asset contract.
 *
 * Decoding, the NEP-461-prefixed hash and the signature check are the NEAR
 * libraries' (`SCHEMA.SignedDelegate`, `encodeDelegateAction`,
 * `PublicKey.verify`). What needs the chain (expiry, nonce, access key,
 * balances) is the mechanism's.
 */
import { createHash } from "node:crypto";
import { deserialize } from "borsh";
import { PublicKey } from "@near-js/crypto";
import { SCHEMA, encodeDelegateAction, type DelegateAction } from "@near-js/transactions";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { verifyEd25519 } from "../../lib/ed25519.js";
import { NearReason } from "./reasons.js";

/** A signed delegate action as the checks read it. */
export interface DecodedDelegate {
  senderId: string;
  receiverId: string;
  nonce: bigint;
  maxBlockHeight: bigint;
  publicKey: PublicKey;
  delegateAction: DelegateAction;
  /** The Borsh `Signature` enum as decoded (kept to relay it unchanged). */
  signature: unknown;
  signatureKeyType: number;
  signatureBytes: Uint8Array;
  /** The decoded bytes, as sent. */
  bytes: Uint8Array;
}

interface TransferCall {
  methodName: string;
  args: Record<string, unknown> | undefined;
  gas: bigint;
  deposit: bigint;
}

export type Checked =
  | { ok: true; delegate: DecodedDelegate; transfer: TransferCall; payer: string }
  | { ok: false; reason: string; message: string; payer?: string };

export interface OfflineLimits {
  /** Our relayer accounts: never the payer. */
  relayers: ReadonlySet<string>;
  minGas: bigint;
  maxGas: bigint;
}

const ACCOUNT_ID = /^(([a-z\d]+[-_])*[a-z\d]+\.)*([a-z\d]+[-_])*[a-z\d]+$/;

export function signedDelegateOf(payload: PaymentPayload): string | undefined {
  const v = (payload.payload as Record<string, unknown> | undefined)?.["signedDelegateAction"];
  return typeof v === "string" &&
    v.length > 0 &&
    v.length <= 8_192 &&
    /^[A-Za-z0-9+/]+={0,2}$/.test(v)
    ? v
    : undefined;
}

/**
 * Decoded once per payload: the service asks for the payer, the
 * authorization key, the shape and the checks of the same payload.
 */
const decoded = new WeakMap<object, { text: string; value: DecodedDelegate | undefined }>();

/** The signed delegate of a payload, or undefined when it is not one. */
export function decodeDelegate(payload: PaymentPayload): DecodedDelegate | undefined {
  const text = signedDelegateOf(payload);
  if (!text) return undefined;
  const inner = payload.payload as object;
  const hit = decoded.get(inner);
  if (hit && hit.text === text) return hit.value;
  const value = decodeText(text);
  decoded.set(inner, { text, value });
  return value;
}

function decodeText(text: string): DecodedDelegate | undefined {
  try {
    const bytes = new Uint8Array(Buffer.from(text, "base64"));
    const raw = deserialize(SCHEMA.SignedDelegate, bytes) as {
      delegateAction: DelegateAction;
      signature: { ed25519Signature?: { data: number[] }; secp256k1Signature?: { data: number[] } };
    };
    const da = raw.delegateAction;
    const pk = da.publicKey as unknown as {
      ed25519Key?: { data: number[] };
      secp256k1Key?: { data: number[] };
    };
    // borsh 1 decodes fixed arrays as plain arrays: the crypto wants bytes.
    const publicKey = pk.ed25519Key
      ? new PublicKey({ keyType: 0, data: Uint8Array.from(pk.ed25519Key.data) })
      : new PublicKey({ keyType: 1, data: Uint8Array.from(pk.secp256k1Key!.data) });
    const sig = raw.signature.ed25519Signature ?? raw.signature.secp256k1Signature!;
    if (!ACCOUNT_ID.test(da.senderId) || !ACCOUNT_ID.test(da.receiverId)) return undefined;
    return {
      senderId: da.senderId,
      receiverId: da.receiverId,
      nonce: BigInt(da.nonce),
      maxBlockHeight: BigInt(da.maxBlockHeight),
      publicKey,
      delegateAction: da,
      signature: raw.signature,
      signatureKeyType: raw.signature.ed25519Signature ? 0 : 1,
      signatureBytes: Uint8Array.from(sig.data),
      bytes,
    };
  } catch {
    return undefined;
  }
}

/** The same for every copy of one authorization: the payer's key and its nonce. */
export function delegateKey(d: DecodedDelegate): string {
  return `${d.senderId}:${d.publicKey.toString()}:${d.nonce}`;
}

/** SHA-256 of the delegate's bytes, hex (for logs and the journal). */
export function delegateFingerprint(d: DecodedDelegate): string {
  return createHash("sha256").update(d.bytes).digest("hex");
}

export function checkSignedDelegate(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  limits: OfflineLimits,
): Checked {
  const delegate = decodeDelegate(payload);
  if (!delegate) {
    return {
      ok: false,
      reason: NearReason.payload,
      message: "payload.signedDelegateAction must be a base64 Borsh NEP-366 SignedDelegate",
    };
  }
  const payer = delegate.senderId;
  const fail = (reason: string, message: string): Checked => ({
    ok: false,
    reason,
    message,
    payer,
  });

  if (delegate.signatureKeyType !== delegate.publicKey.keyType) {
    return fail(NearReason.keyType, "the signature's curve does not match the signing key's type");
  }
  let valid = false;
  try {
    const hash = createHash("sha256")
      .update(encodeDelegateAction(delegate.delegateAction))
      .digest();
    // Ed25519 through OpenSSL (the library's pure-JS curve is 15× slower);
    // secp256k1 through the library, which uses the native binding.
    valid =
      delegate.publicKey.keyType === 0
        ? verifyEd25519(delegate.publicKey.data, hash, delegate.signatureBytes)
        : delegate.publicKey.verify(hash, delegate.signatureBytes);
  } catch {
    valid = false;
  }
  if (!valid) {
    return fail(
      NearReason.signature,
      "the signature does not verify over the delegate action with its key",
    );
  }
  if (limits.relayers.has(payer)) {
    return fail(
      NearReason.relayerIsPayer,
      "the payer is one of this facilitator's relayer accounts",
    );
  }
  const actions = delegate.delegateAction.actions;
  const call = actions.length === 1 ? actions[0]!.functionCall : undefined;
  if (!call) {
    return fail(
      NearReason.actions,
      `the delegate action must hold exactly one FunctionCall, it holds ${actions.length} action(s)`,
    );
  }
  if (call.methodName !== "ft_transfer") {
    return fail(NearReason.method, `the call must be ft_transfer, not ${call.methodName}`);
  }
  if (delegate.receiverId !== requirements.asset) {
    return fail(
      NearReason.asset,
      `the call goes to ${delegate.receiverId}, not the asset contract ${requirements.asset}`,
    );
  }
  let args: Record<string, unknown> | undefined;
  try {
    const parsed = JSON.parse(Buffer.from(Uint8Array.from(call.args)).toString("utf8")) as unknown;
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed))
      args = parsed as Record<string, unknown>;
  } catch {
    args = undefined;
  }
  if (!args || args["receiver_id"] !== requirements.payTo) {
    return fail(NearReason.recipient, `ft_transfer must pay receiver_id ${requirements.payTo}`);
  }
  const amount = args["amount"];
  if (typeof amount !== "string" || !/^\d+$/.test(amount) || amount !== requirements.amount) {
    return fail(
      NearReason.amount,
      `ft_transfer must move exactly ${requirements.amount} (a string of digits)`,
    );
  }
  const deposit = BigInt(call.deposit);
  if (deposit !== 1n) {
    return fail(
      NearReason.deposit,
      `ft_transfer must attach exactly 1 yoctoNEAR, it attaches ${deposit}`,
    );
  }
  const gas = BigInt(call.gas);
  if (gas < limits.minGas || gas > limits.maxGas) {
    return fail(
      NearReason.gas,
      `ft_transfer gas must be from ${limits.minGas / 10n ** 12n} to ${limits.maxGas / 10n ** 12n} TGas, it is ${gas}`,
    );
  }
  return {
    ok: true,
    delegate,
    payer,
    transfer: { methodName: call.methodName, args, gas, deposit },
  };
}
