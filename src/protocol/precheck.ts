/**
 * The protocol's own checks of a payment, before any family's: the version,
 * then whether the network is served, then whether the scheme is offered on
 * it. Each refusal names what to change.
 */
import { X402_VERSION, type PaymentRequest } from "./index.js";
import type { Refusal } from "./answers.js";
import { Reason } from "./reasons.js";

/**
 * Swap settlement (pay in one token, settle in another) is announced as
 * experimental and not offered: a payment asking for it is refused like any
 * other unsupported scheme, with a message that says so rather than leaving a
 * merchant who heard of it to wonder whether the name was wrong.
 */
const SWAP_SCHEME = /swap/i;

/**
 * The refusal of a request this service cannot take as it is, or undefined.
 * `schemes`: the schemes served on the request's network (undefined: the
 * network is not served).
 */
export function protocolRefusal(
  req: PaymentRequest,
  schemes: readonly string[] | undefined,
): Omit<Refusal, "ok"> | undefined {
  if (req.x402Version !== X402_VERSION || req.paymentPayload.x402Version !== X402_VERSION) {
    return {
      reason: Reason.invalidX402Version,
      message: `x402Version must be ${X402_VERSION} in the request and in paymentPayload`,
    };
  }
  const { network, scheme } = req.paymentRequirements;
  if (!schemes) {
    return {
      reason: Reason.invalidNetwork,
      message: `network ${network} is not supported here; see GET /supported`,
    };
  }
  if (!schemes.includes(scheme)) {
    return {
      reason: Reason.unsupportedScheme,
      message: SWAP_SCHEME.test(scheme)
        ? `swap settlement (scheme ${scheme}) is experimental and not available yet; see GET /supported`
        : `scheme ${scheme} is not supported on ${network}; see GET /supported`,
    };
  }
  return undefined;
}
