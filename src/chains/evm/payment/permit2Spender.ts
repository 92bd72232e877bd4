/**
 * Where a payer's Permit2 permit was spent, when a transaction that is not
 * ours spent it. Anyone may submit the signed permit to the exact or upto
 * Permit2 proxy, and the signature fixes the recipient (the witness's `to`)
 * and the most it moves, so such a transaction paid the merchant: a success
 * a reorg took back whose permit was spent so, meanwhile, still stands.
 *
 * Permit2 keeps its nonces as a bitmap (`nonceBitmap(owner, nonce >> 8)`,
 * bit `nonce & 0xff`) and logs nothing when one is spent. The spender is
 * found from the token's `Transfer` from the payer to the recipient, in a
 * bounded range of recent blocks, and is taken only when it is a direct
 * call of a proxy whose permit names this owner and this nonce (one nonce
 * is spent once, whoever spends it) and its receipt carries the promised
 * transfer. A permit spent through any other contract is not recognised.
 */
import {
  PERMIT2_ADDRESS,
  x402ExactPermit2ProxyABI,
  x402ExactPermit2ProxyAddress,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
} from "@x402/evm";
import {
  decodeFunctionData,
  erc20Abi,
  getAddress,
  parseAbi,
  type Abi,
  type Hex,
  type PublicClient,
} from "viem";
import { carriesTransfer, type PromisedTransfer } from "./promisedTransfer.js";

const NONCE_BITMAP_ABI = parseAbi([
  "function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)",
]);

/** The proxies a permit is settled through, by address. */
const PROXIES = new Map<string, Abi>([
  [getAddress(x402ExactPermit2ProxyAddress), x402ExactPermit2ProxyABI],
  [getAddress(x402UptoPermit2ProxyAddress), x402UptoPermit2ProxyABI],
]);

/** The payer's permit a stored request carries (`permit2Authorization`), if it is one. */
export function permitOf(request: unknown): { owner: Hex; nonce: bigint } | undefined {
  const r = request as {
    paymentPayload?: { payload?: { permit2Authorization?: { from?: unknown; nonce?: unknown } } };
  };
  const auth = r.paymentPayload?.payload?.permit2Authorization;
  if (typeof auth?.from !== "string" || typeof auth.nonce !== "string") return undefined;
  if (!/^\d+$/.test(auth.nonce)) return undefined;
  return { owner: auth.from as Hex, nonce: BigInt(auth.nonce) };
}

/** Whether Permit2 holds `nonce` of `owner` spent. */
async function permitNonceSpent(
  client: PublicClient,
  permit: { owner: Hex; nonce: bigint },
): Promise<boolean> {
  const word = await client.readContract({
    address: PERMIT2_ADDRESS,
    abi: NONCE_BITMAP_ABI,
    functionName: "nonceBitmap",
    args: [permit.owner, permit.nonce >> 8n],
  });
  return ((word >> (permit.nonce & 0xffn)) & 1n) === 1n;
}

/** Whether a call's input is a proxy settle of this owner's permit at this nonce. */
function settlesPermit(to: Hex | null, input: Hex, permit: { owner: Hex; nonce: bigint }): boolean {
  const abi = to ? PROXIES.get(getAddress(to)) : undefined;
  if (!abi) return false;
  try {
    const call = decodeFunctionData({ abi, data: input });
    const item = abi.find((i) => i.type === "function" && i.name === call.functionName);
    if (item?.type !== "function" || !call.args) return false;
    const at = (name: string) => call.args![item.inputs.findIndex((i) => i.name === name)];
    const signed = at("permit") as { nonce?: bigint } | undefined;
    const owner = at("owner");
    return (
      signed?.nonce === permit.nonce &&
      typeof owner === "string" &&
      owner.toLowerCase() === permit.owner.toLowerCase()
    );
  } catch {
    return false;
  }
}

/**
 * The transaction that spent the permit and carries the promised transfer,
 * searched in the `blocks` before the latest; undefined when the nonce is
 * unspent or no such transaction is found there.
 */
export async function permit2Spender(
  client: PublicClient,
  permit: { owner: Hex; nonce: bigint },
  expected: PromisedTransfer,
  blocks: bigint,
): Promise<Hex | undefined> {
  if (!(await permitNonceSpent(client, permit))) return undefined;
  const latest = await client.getBlockNumber();
  const logs = await client.getContractEvents({
    address: expected.token as Hex,
    abi: erc20Abi,
    eventName: "Transfer",
    args: { from: permit.owner, to: expected.to as Hex },
    fromBlock: latest > blocks ? latest - blocks : 0n,
    toBlock: latest,
  });
  const hashes = [...new Set(logs.map((l) => l.transactionHash).filter((h) => h !== null))];
  for (const hash of hashes.reverse()) {
    const tx = await client.getTransaction({ hash });
    if (!settlesPermit(tx.to, tx.input, permit)) continue;
    const receipt = await client.getTransactionReceipt({ hash });
    if (receipt.status === "success" && carriesTransfer(receipt, expected)) return hash;
  }
  return undefined;
}
