/**
 * What a sponsored approve is for: the Permit2 settlement it is sent before
 * (exact and upto proxies' `settle`, a batch-settlement deposit through the
 * Permit2 collector), and the payment's Permit2 authorization, wherever its
 * scheme puts it. Read from calldata and payloads, without the chain.
 */
import {
  BATCH_SETTLEMENT_ADDRESS,
  PERMIT2_ADDRESS,
  x402ExactPermit2ProxyABI,
  x402ExactPermit2ProxyAddress,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
} from "@x402/evm";
import type { PaymentPayload } from "@x402/core/types";
import { decodeFunctionData, getAddress, isAddress, parseAbi, type Hex } from "viem";
import { ApprovalReason } from "../reasons.js";

/** Permit2, the one spender a sponsored approve may approve. */
export const PERMIT2 = getAddress(PERMIT2_ADDRESS);
const EXACT_PROXY = getAddress(x402ExactPermit2ProxyAddress);
const UPTO_PROXY = getAddress(x402UptoPermit2ProxyAddress);
const BATCH_ESCROW = getAddress(BATCH_SETTLEMENT_ADDRESS);
/**
 * The batch-settlement escrow's Permit2 deposit collector: the CREATE2
 * address `@x402/evm` deposits through, which its index does not export.
 */
const PERMIT2_DEPOSIT_COLLECTOR = getAddress("0x4020425FAf3B746C082C2f942b4E5159887B0005");
/** The escrow's deposit, the one call of it a sponsored approve is sent for. */
const ESCROW_DEPOSIT_ABI = parseAbi([
  "function deposit((address payer, address payerAuthorizer, address receiver, address receiverAuthorizer, address token, uint40 withdrawDelay, bytes32 salt) config, uint128 amount, address collector, bytes collectorData)",
]);

/**
 * The Permit2 settlement a sponsored approve is sent for: the amount it
 * moves (which Permit2's allowance must cover) and, for `upto`, the one
 * account of ours the proxy accepts it from (the witness's facilitator).
 * One per scheme that takes the extension: the exact and upto proxies'
 * `settle`, and a batch-settlement `deposit` through the Permit2 collector.
 * Undefined for any other call: no approve is sent or funded for it.
 */
export function settlementOf(call: {
  to: Hex;
  data: Hex;
}): { needed: bigint; sender?: Hex } | undefined {
  try {
    const to = getAddress(call.to);
    if (to === EXACT_PROXY) {
      const d = decodeFunctionData({ abi: x402ExactPermit2ProxyABI, data: call.data });
      if (d.functionName === "settle") {
        const [permit] = d.args as unknown as [{ permitted: { amount: bigint } }];
        return { needed: permit.permitted.amount };
      }
    } else if (to === UPTO_PROXY) {
      const d = decodeFunctionData({ abi: x402UptoPermit2ProxyABI, data: call.data });
      if (d.functionName === "settle") {
        const [, amount, , witness] = d.args as unknown as [
          unknown,
          bigint,
          unknown,
          { facilitator: Hex },
        ];
        return { needed: amount, sender: getAddress(witness.facilitator) };
      }
    } else if (to === BATCH_ESCROW) {
      const d = decodeFunctionData({ abi: ESCROW_DEPOSIT_ABI, data: call.data });
      const [, amount, collector] = d.args;
      if (getAddress(collector) === PERMIT2_DEPOSIT_COLLECTOR) return { needed: amount };
    }
  } catch {
    // falls through: not a settlement we send an approve for
  }
  return undefined;
}

export const NOT_A_SETTLEMENT = `${ApprovalReason.failed}: the call after the approve is not a Permit2 settlement this service sponsors (exact or upto proxy settle, batch-settlement deposit through the Permit2 collector)`;

/**
 * The payment's Permit2 authorization, where each scheme puts it: at the
 * top of an exact or upto payload, in a batch-settlement deposit's
 * `deposit.authorization`.
 */
export function permit2AuthorizationOf(
  payload: PaymentPayload,
): { from: string; permitted: { amount: string } } | undefined {
  const inner = payload.payload as Record<string, unknown> | undefined;
  const deposit = inner?.["deposit"] as { authorization?: Record<string, unknown> } | undefined;
  const auth = inner?.["permit2Authorization"] ?? deposit?.authorization?.["permit2Authorization"];
  if (typeof auth !== "object" || auth === null) return undefined;
  const a = auth as { from?: unknown; permitted?: { amount?: unknown } };
  if (typeof a.from !== "string" || !isAddress(a.from, { strict: false })) return undefined;
  const amount = a.permitted?.amount;
  if (typeof amount !== "string" || !/^\d{1,78}$/.test(amount)) return undefined;
  return { from: a.from, permitted: { amount } };
}
