/**
 * Who caused an EVM settlement that failed on-chain, proven from the failed
 * transaction itself.
 *
 * The account that settles chose the requirements (network, asset, payTo,
 * amount); the payer chose its wallet and what it does with its funds. A
 * stranger's wallet must not use up a merchant's failure limit, and nobody
 * may get an honest payer refused everywhere, so a failure is the payer's
 * only on evidence read from the transaction that failed, at its block, and
 * from what the payer signed:
 * - the transaction reverted (a mined success that moved nothing, a batch
 *   `settle` with nothing left to pay, is nobody's doing but the receiver's);
 * - and the payer (the signer the mechanism verified: paymentIdentity.ts)
 *   caused it: at that block its balance was below what it signed, it
 *   cancelled the signed EIP-3009 authorization itself, or the revert began
 *   inside code running at its address (its wallet's signature check, an
 *   EIP-7702 delegation), as the node's call trace shows.
 *
 * What is never evidence: an extension in the payload, the requirement's
 * amount (the merchant sets it), code at the payer's address by itself, or
 * an authorization spent by someone else (anyone may submit an EIP-3009
 * authorization, and it still pays `payTo` what it promised; a merchant or a
 * mempool copier that spends it first must not get the payer refused). A
 * node that cannot trace, or a read that fails, proves nothing: the failure
 * is then the requirements', as before payers were told apart.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  erc20Abi,
  getAddress,
  isAddress,
  parseAbi,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import type { FailureCause } from "../../ports.js";
import { evmPayerOf } from "./paymentIdentity.js";

const EIP3009_EVENTS = parseAbi([
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)",
]);

/** How far back a cancellation of the authorization is looked for (providers cap log ranges). */
const CANCEL_SEARCH_BLOCKS = 2_000n;

type Fields = Record<string, unknown>;

const fields = (v: unknown): Fields => (typeof v === "object" && v !== null ? (v as Fields) : {});

/** What the payer signed to move: the value of its authorization or permit, or its deposit. */
function signedAmount(payload: PaymentPayload): bigint | undefined {
  const body = fields(payload.payload);
  const raw =
    fields(fields(body["permit2Authorization"])["permitted"])["amount"] ??
    fields(body["authorization"])["value"] ??
    fields(body["deposit"])["amount"];
  return typeof raw === "string" && /^\d{1,78}$/.test(raw) ? BigInt(raw) : undefined;
}

/** One frame of a `callTracer` trace. */
interface CallFrame {
  to?: string;
  error?: string;
  calls?: CallFrame[];
}

/**
 * The frame where a revert began: the deepest failing frame none of whose
 * own calls failed. (A frame that failed after a call of its own failed and
 * was caught is still where its revert began.)
 */
function revertOrigin(frame: CallFrame): CallFrame | undefined {
  if (!frame.error) return undefined;
  for (const call of [...(frame.calls ?? [])].reverse()) {
    const deeper = revertOrigin(call);
    if (deeper) return deeper;
  }
  return frame;
}

/** Whether any frame of the trace ran at `address` (code there ran in our transaction). */
function ranAt(frame: CallFrame, address: string): boolean {
  if (frame.to?.toLowerCase() === address) return true;
  return (frame.calls ?? []).some((c) => ranAt(c, address));
}

/**
 * Whether the payer's own code made the transaction fail: the revert began
 * at its address, or the transaction ran out of gas with its code among the
 * frames (a wallet that burns the gas it is lent). Undefined when the node
 * cannot trace.
 */
async function payerCodeFailed(
  client: PublicClient,
  hash: Hex,
  payer: string,
): Promise<boolean | undefined> {
  const trace = (await client
    .request({
      method: "debug_traceTransaction",
      params: [hash, { tracer: "callTracer" }],
    } as never)
    .catch(() => undefined)) as CallFrame | undefined;
  if (!trace || typeof trace !== "object") return undefined;
  const origin = revertOrigin(trace);
  if (!origin) return false;
  if (origin.to?.toLowerCase() === payer) return true;
  return /out of gas/i.test(origin.error ?? "") && ranAt(trace, payer);
}

async function cancelledByPayer(
  client: PublicClient,
  asset: Hex,
  payer: Hex,
  nonce: Hex,
  block: bigint,
): Promise<boolean> {
  const used = await client.readContract({
    address: asset,
    abi: EIP3009_EVENTS,
    functionName: "authorizationState",
    args: [payer, nonce],
    blockNumber: block,
  });
  if (!used) return false;
  const cancelled = await client.getContractEvents({
    address: asset,
    abi: EIP3009_EVENTS,
    eventName: "AuthorizationCanceled",
    args: { authorizer: payer, nonce },
    fromBlock: block > CANCEL_SEARCH_BLOCKS ? block - CANCEL_SEARCH_BLOCKS : 0n,
    toBlock: block,
  });
  return cancelled.length > 0;
}

export async function evmFailureCause(
  client: PublicClient,
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  transaction: string | undefined,
): Promise<FailureCause> {
  const named = evmPayerOf(payload, requirements);
  if (!named || !isAddress(named, { strict: false })) return "requirements";
  if (!transaction || !/^0x[0-9a-fA-F]{64}$/.test(transaction)) return "requirements";
  const hash = transaction as Hex;
  const receipt: TransactionReceipt | undefined = await client
    .getTransactionReceipt({ hash })
    .catch(() => undefined);
  if (!receipt || receipt.status !== "reverted") return "requirements";
  const payer = getAddress(named);
  const block = receipt.blockNumber;
  const asset = requirements.asset as Hex;

  const signed = signedAmount(payload);
  if (signed !== undefined && isAddress(asset, { strict: false })) {
    const balance = await client.readContract({
      address: asset,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [payer],
      blockNumber: block,
    });
    if (balance < signed) return "payer";
  }

  const nonce = fields(fields(payload.payload)["authorization"])["nonce"];
  if (typeof nonce === "string" && /^0x[0-9a-fA-F]{64}$/.test(nonce)) {
    const cancelled = await cancelledByPayer(client, asset, payer, nonce as Hex, block).catch(
      () => false,
    );
    if (cancelled) return "payer";
  }

  if (await payerCodeFailed(client, hash, payer.toLowerCase())) return "payer";
  return "requirements";
}
