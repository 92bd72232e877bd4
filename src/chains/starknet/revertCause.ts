/**
 * Reading a Starknet revert: where it arose (the contracts a node's revert
 * reason names, outermost first), the reason a settle is answered with, and
 * who caused it, decided by where it arose and never by the text a payer's
 * own account chose to panic with.
 */
import { Reason } from "../../protocol/reasons.js";
import type { FailureCause } from "../ports.js";
import { StarknetReason } from "./reasons.js";
import { addressHex } from "./outsideExecution.js";

/** Revert messages of SNIP-9 accounts that name the payment's own fault (the reason given, not who caused it). */
function reasonForRevert(revert: string): string {
  if (/nonce/i.test(revert)) return StarknetReason.nonceUsed;
  if (/caller/i.test(revert)) return StarknetReason.caller;
  if (/signature/i.test(revert)) return StarknetReason.signature;
  if (/execute_before|execute_after|expired|timestamp/i.test(revert)) {
    return StarknetReason.expired;
  }
  if (/balance|u256_sub|insufficient/i.test(revert)) return Reason.insufficientFunds;
  return StarknetReason.simulation;
}

/**
 * Reverts the payer causes after our check: its token balance no longer
 * covers the amount, its outside-execution nonce was used by a transaction
 * of its own, or its account refuses the signature when it runs (an
 * account whose answer changed since the simulation). The others (the
 * window passed, a token or account that fails for its own reasons) are
 * not the payer's.
 */
const PAYER_REVERTS: ReadonlySet<string> = new Set([
  Reason.insufficientFunds,
  StarknetReason.nonceUsed,
  StarknetReason.signature,
]);

/** Who caused a revert, by the reason it was given: only for a revert that names no call frames. */
function causeOfStarknetRevert(reason: string): FailureCause {
  return PAYER_REVERTS.has(reason) ? "payer" : "requirements";
}

/** A frame header of a node's revert reason, with the contract it names. */
const FRAME_HEADER =
  /^(?:\d+: )?Error in (?:the called )?contract \(contract address: (0x[0-9a-fA-F]+), class hash: 0x[0-9a-fA-F]+, selector: 0x[0-9a-fA-F]+\):$/;
/** Lines a node writes between frame headers (older formats included). */
const FRAME_FILLER =
  /^(?:Transaction execution has failed:|Execution failed\. Failure reason:|Error at pc=\S+:|Cairo traceback \(most recent call last\):|Unknown location \(pc=\S+\))$/;

/**
 * A node's revert reason split into the contracts the panic went up
 * through (outermost first, the one where it arose last) and the failure
 * that follows them. The frames are read only from the reason's leading
 * run of frame headers: the failure after them is the panicking contract's
 * own data, and a hostile contract's long panic message could imitate a
 * header there. No frames: a reason without that structure.
 */
export function parseRevert(revert: string): { frames: bigint[]; failure: string } {
  const lines = revert.split("\n");
  const frames: bigint[] = [];
  let i = 0;
  for (; i < lines.length; i++) {
    const line = lines[i]!.trim();
    const header = FRAME_HEADER.exec(line);
    if (header) frames.push(BigInt(header[1]!));
    else if (!FRAME_FILLER.test(line)) break;
  }
  return { frames, failure: frames.length > 0 ? lines.slice(i).join("\n") : revert };
}

/** A token's own refusal for want of the sender's balance. */
const BALANCE_REFUSAL = /balance|u256_sub|insufficient/i;

/**
 * Who caused a settlement's revert, by where it arose (the revert reason's
 * call frames), whatever its text says:
 *
 * - in the payer's own account contract (its `execute_from_outside_v2`
 *   panicked, or a call its code made on its own: the outside execution
 *   names only the asset's transfer): the payer;
 * - in the asset's transfer the payer's account called: the payer when the
 *   token refused for want of the payer's balance, otherwise the
 *   requirements (the asset is the merchant's choice);
 * - anywhere else (our executor's own call, before the payer's account
 *   ran): the requirements.
 *
 * A reason without frames (a node that gives none) falls back to its text.
 */
export function causeOfRevert(
  revert: string,
  parties: { payer: bigint; asset: bigint },
): FailureCause {
  const { frames, failure } = parseRevert(revert);
  if (frames.length === 0) return causeOfStarknetRevert(reasonForRevert(revert));
  const inPayer = frames.indexOf(parties.payer);
  if (inPayer < 0) return "requirements";
  const next = frames[inPayer + 1];
  if (next === undefined || next !== parties.asset) return "payer";
  return BALANCE_REFUSAL.test(failure) ? "payer" : "requirements";
}

/** A revert on one line, for a message: its failure, and the contract it arose in. */
export function describeRevert(revert: string): string {
  const { frames, failure } = parseRevert(revert);
  const text = failure.replace(/\s+/g, " ").trim() || "no reason given";
  const where = frames.at(-1);
  return where === undefined ? text : `${text} in ${addressHex(where)}`;
}

/** The reason a revert is answered with: from its failure's text, frames aside. */
export function reasonOfRevert(revert: string): string {
  return reasonForRevert(parseRevert(revert).failure);
}
