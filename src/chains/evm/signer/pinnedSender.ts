/**
 * Calls that only one facilitator account may make.
 *
 * The x402 upto proxy lets the caller choose the amount (up to the payer's
 * signed maximum), so it accepts `settle` only from the facilitator address
 * the payer signed into the witness. The mechanism does not say which of our
 * accounts to use (its signer port has no sender argument), so the signer
 * reads it from the call itself: both the simulation (an eth_call from that
 * address) and the transaction must come from it.
 */
import { x402UptoPermit2ProxyAddress } from "@x402/evm";
import { isAddress, type Hex } from "viem";

/** Index of the witness argument, per upto proxy function. */
const WITNESS_ARG: Record<string, number> = { settle: 3, settleWithPermit: 4 };

export function pinnedSender(
  contract: string,
  functionName: string,
  args: readonly unknown[] | undefined,
): Hex | undefined {
  if (contract.toLowerCase() !== x402UptoPermit2ProxyAddress.toLowerCase()) return undefined;
  const index = WITNESS_ARG[functionName];
  if (index === undefined) return undefined;
  const witness = args?.[index] as { facilitator?: unknown } | undefined;
  const facilitator = witness?.facilitator;
  return typeof facilitator === "string" && isAddress(facilitator, { strict: false })
    ? (facilitator as Hex)
    : undefined;
}
