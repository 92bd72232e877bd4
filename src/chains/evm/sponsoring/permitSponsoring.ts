/**
 * `eip2612GasSponsoring`: the fields of a payer's EIP-2612 permit that the
 * official mechanisms check at verify but not at settle (where they skip
 * straight to the proxy's `settleWithPermit`). Checked here, from the
 * family's `prepare`, at both, so a payment /verify refuses is never
 * settled and both answer the same reason (the mechanisms' own strings).
 */
import {
  extractEip2612GasSponsoringInfo,
  validateEip2612GasSponsoringInfo,
} from "@x402/extensions";
import { PERMIT2_ADDRESS } from "@x402/evm";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { getAddress, isAddress } from "viem";
import { permit2AuthorizationOf } from "./sponsoredSettlement.js";

const PERMIT2 = getAddress(PERMIT2_ADDRESS);

/** Why the payment's permit cannot serve it, or undefined (none carried, or a fit one). */
export function eip2612Refusal(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): { reason: string; message: string } | undefined {
  const auth = permit2AuthorizationOf(payload);
  const info = auth ? extractEip2612GasSponsoringInfo(payload) : null;
  if (!auth || !info) return undefined;
  const same = (a: string, b: string) =>
    isAddress(a, { strict: false }) && getAddress(a) === getAddress(b);
  if (!validateEip2612GasSponsoringInfo(info)) {
    return {
      reason: "invalid_eip2612_extension_format",
      message:
        "extensions.eip2612GasSponsoring.info must carry from, asset, spender, amount, nonce, deadline, signature and version",
    };
  }
  if (!same(info.from, auth.from)) {
    return { reason: "eip2612_from_mismatch", message: "the permit's from is not the payer" };
  }
  if (!same(info.asset, requirements.asset)) {
    return { reason: "eip2612_asset_mismatch", message: "the permit is for another token" };
  }
  if (!same(info.spender, PERMIT2)) {
    return {
      reason: "eip2612_spender_not_permit2",
      message: `the permit's spender must be Permit2 (${PERMIT2})`,
    };
  }
  return undefined;
}
