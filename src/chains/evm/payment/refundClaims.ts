/**
 * Which claims a batch-settlement refund may carry.
 */
import { computeChannelId } from "@x402/evm/batch-settlement/client";

/**
 * A refund settles its own channel, and the claims it carries are settled
 * with it at no charge of their own beyond their vouchers: a claim of
 * another channel has no place in it (it would ride along on this one's
 * refund). The message naming the first such claim, or undefined.
 */
export function foreignRefundClaim(
  body: Record<string, unknown>,
  network: string,
): string | undefined {
  if (body["type"] !== "refund" || !Array.isArray(body["claims"])) return undefined;
  let own: string;
  try {
    own = computeChannelId(body["channelConfig"] as never, network).toLowerCase();
  } catch {
    return "paymentPayload.payload.channelConfig must describe the refunded channel";
  }
  const index = (body["claims"] as { voucher?: { channel?: unknown } }[]).findIndex((c) => {
    try {
      return computeChannelId(c.voucher?.channel as never, network).toLowerCase() !== own;
    } catch {
      return true;
    }
  });
  return index < 0
    ? undefined
    : `paymentPayload.payload.claims[${index}] is a voucher of another channel; a refund carries only its own channel's claims`;
}
