/**
 * For resource servers and merchants' own tools: the receipts of
 * confidential payments, checked against the chain and kept on your side.
 *
 * When the vault collects a confidential payment it stores a hiding
 * commitment to the merchant's slot, `keccak256(abi.encode(key, slot,
 * blinding))`, in the same transaction. The receipt in the settle answer
 * (`extensions.confidential`) is that commitment's opening: the slot and the
 * blinding. Nobody signs it: it is good exactly when it opens the commitment
 * the chain holds for the payment, and then the payment is the slot's and no
 * other slot's.
 *
 * - `checkReceipt` reads the payment from the vault (any RPC of your own) and
 *   says whether the receipt opens its commitment to your slot, for the
 *   amount and day the vault recorded.
 * - `ReceiptStore` (receiptStore.ts, Node only) keeps receipts in a
 *   JSON-lines file of your own; `keepReceipts` is an `onAfterSettle` hook
 *   that writes every confidential receipt into it as the facilitator
 *   answers, so you hold each from the first moment, whatever the
 *   facilitator later says.
 * - `challengeCall` and `redeemCall` build the vault transactions from
 *   receipts and this file's ABI alone: `npm run confidential:check` and the
 *   dashboard's tab send nothing else (a service that answered with other
 *   calldata is never asked for any).
 *
 * The blinding is derived from the slot's salt and the payment's key
 * (`paymentBlinding`), so a merchant holding its salt (it signs its
 * enablement message again to get it) can recognise its payments in the
 * vault's ledger even without the receipts.
 *
 * Nothing here touches the file system: the dashboard's browser tab uses it.
 */
import {
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  getAddress,
  keccak256,
  stringToHex,
  type Address,
  type Hex,
} from "viem";

/** A confidential payment's receipt: the opening of its commitment, and what the vault recorded. */
export interface ConfidentialReceipt {
  /** The vault that collected it. */
  vault: Address;
  /** How the vault names the payment: keccak256(abi.encode(payer, nonce)). */
  key: Hex;
  payer: Address;
  /** The payment's EIP-3009 nonce. */
  nonce: Hex;
  /** The merchant's slot, decimal. */
  slot: string;
  blinding: Hex;
  /** keccak256(abi.encode(key, slot, blinding)): what the vault stored at collect. */
  commitment: Hex;
  /** Atomic USDC units, decimal: the vault's record. */
  amount: string;
  /** The UTC day the vault collected it in. */
  day: number;
}

/** What the vault holds for a payment (`payment(key)`). */
export interface VaultPayment {
  amount: bigint;
  day: number;
  /** 0 none, 1 collected, 2 redeemed, 3 returned. */
  state: number;
  commitment: Hex;
}

/** The vault functions a merchant's tools call, and nothing else. */
export const merchantVaultAbi = [
  {
    type: "function",
    name: "payment",
    stateMutability: "view",
    inputs: [{ name: "key", type: "bytes32" }],
    outputs: [
      { name: "payer", type: "address" },
      { name: "amount", type: "uint64" },
      { name: "day", type: "uint32" },
      { name: "state", type: "uint8" },
      { name: "commitment", type: "bytes32" },
    ],
  },
  {
    type: "function",
    name: "presented",
    stateMutability: "view",
    inputs: [{ name: "key", type: "bytes32" }],
    outputs: [{ name: "", type: "bool" }],
  },
  {
    type: "function",
    name: "dayInfo",
    stateMutability: "view",
    inputs: [{ name: "day", type: "uint256" }],
    outputs: [
      { name: "collected", type: "uint64" },
      { name: "payments", type: "uint32" },
      { name: "redeemed", type: "uint64" },
      { name: "returned", type: "uint64" },
      { name: "attempt", type: "uint32" },
      { name: "slotsCredited", type: "uint32" },
      { name: "slotsReleased", type: "uint32" },
      { name: "phase", type: "uint8" },
      { name: "matches", type: "bytes32" },
    ],
  },
  {
    type: "function",
    name: "dayChallenges",
    stateMutability: "view",
    inputs: [{ name: "day", type: "uint256" }],
    outputs: [
      { name: "closedAt", type: "uint256" },
      { name: "openChallenges", type: "uint256" },
      { name: "bondShare", type: "uint256" },
    ],
  },
  {
    type: "function",
    name: "challengeWindow",
    stateMutability: "view",
    inputs: [],
    outputs: [{ name: "", type: "uint256" }],
  },
  {
    type: "function",
    name: "viewerOf",
    stateMutability: "view",
    inputs: [{ name: "slot", type: "uint256" }],
    outputs: [{ name: "", type: "address" }],
  },
  {
    type: "function",
    name: "slotDayCredit",
    stateMutability: "view",
    inputs: [
      { name: "slot", type: "uint256" },
      { name: "day", type: "uint256" },
    ],
    outputs: [{ name: "", type: "bytes32" }],
  },
  {
    type: "function",
    name: "slotInfo",
    stateMutability: "view",
    inputs: [{ name: "slot", type: "uint256" }],
    outputs: [
      { name: "commitment", type: "bytes32" },
      { name: "balance", type: "bytes32" },
      { name: "withdrawNonce", type: "uint64" },
      { name: "revealedOwner", type: "address" },
    ],
  },
  {
    type: "function",
    name: "challenge",
    stateMutability: "nonpayable",
    inputs: [
      { name: "day", type: "uint256" },
      { name: "slot", type: "uint256" },
      {
        name: "openings",
        type: "tuple[]",
        components: [
          { name: "key", type: "bytes32" },
          { name: "blinding", type: "bytes32" },
        ],
      },
    ],
    outputs: [{ name: "id", type: "uint256" }],
  },
  {
    type: "function",
    name: "redeem",
    stateMutability: "nonpayable",
    inputs: [
      { name: "key", type: "bytes32" },
      { name: "slot", type: "uint256" },
      { name: "blinding", type: "bytes32" },
    ],
    outputs: [],
  },
  {
    type: "function",
    name: "cancelWithdraw",
    stateMutability: "nonpayable",
    inputs: [{ name: "id", type: "uint256" }],
    outputs: [],
  },
] as const;

/** How the vault names a payment: payer and nonce (EIP-3009 nonces are per payer). */
export function paymentKey(payer: Address, nonce: Hex): Hex {
  return keccak256(
    encodeAbiParameters([{ type: "address" }, { type: "bytes32" }], [getAddress(payer), nonce]),
  );
}

/** The blinding of a payment to a slot: only the slot's salt (its merchant's, and ours) derives it. */
export function paymentBlinding(salt: Hex, key: Hex): Hex {
  return keccak256(concat([stringToHex("x402 confidential payment blinding"), salt, key]));
}

/** What the vault stores for a payment attributed to `slot`: hiding without the blinding. */
export function paymentCommitment(key: Hex, slot: bigint, blinding: Hex): Hex {
  return keccak256(
    encodeAbiParameters(
      [{ type: "bytes32" }, { type: "uint256" }, { type: "bytes32" }],
      [key, slot, blinding],
    ),
  );
}

/** The receipt in a settle answer's `extensions.confidential`, if it carries one that parses. */
export function receiptIn(settleResponse: unknown): ConfidentialReceipt | undefined {
  const ext = (settleResponse as { extensions?: Record<string, unknown> } | null)?.extensions;
  const r = ext?.["confidential"] as Record<string, unknown> | undefined;
  const hex32 = (v: unknown) => typeof v === "string" && /^0x[0-9a-fA-F]{64}$/.test(v);
  const addr = (v: unknown) => typeof v === "string" && /^0x[0-9a-fA-F]{40}$/.test(v);
  const dec = (v: unknown) => typeof v === "string" && /^[0-9]{1,78}$/.test(v);
  if (
    !r ||
    !addr(r["vault"]) ||
    !hex32(r["key"]) ||
    !addr(r["payer"]) ||
    !hex32(r["nonce"]) ||
    !dec(r["slot"]) ||
    !hex32(r["blinding"]) ||
    !hex32(r["commitment"]) ||
    !dec(r["amount"]) ||
    typeof r["day"] !== "number" ||
    !Number.isInteger(r["day"])
  ) {
    return undefined;
  }
  return {
    vault: getAddress(r["vault"] as string),
    key: r["key"] as Hex,
    payer: getAddress(r["payer"] as string),
    nonce: r["nonce"] as Hex,
    slot: r["slot"] as string,
    blinding: r["blinding"] as Hex,
    commitment: r["commitment"] as Hex,
    amount: r["amount"] as string,
    day: r["day"],
  };
}

/**
 * Why `receipt` is not good for `slot` on the vault at `vault`, or null
 * when it is: it names this vault and slot, its key is its payer and
 * nonce's, it opens the commitment, and the vault holds that very
 * commitment for a payment of that amount and day (`read`: the vault's
 * `payment(key)`, read from a chain node you trust).
 */
export async function checkReceipt(
  receipt: ConfidentialReceipt,
  expected: { vault: Address; slot: bigint },
  read: (key: Hex) => Promise<VaultPayment>,
): Promise<string | null> {
  if (getAddress(receipt.vault) !== getAddress(expected.vault)) return "another vault's receipt";
  if (BigInt(receipt.slot) !== expected.slot) return `a receipt for slot ${receipt.slot}`;
  if (paymentKey(receipt.payer, receipt.nonce).toLowerCase() !== receipt.key.toLowerCase()) {
    return "its key is not its payer and nonce's";
  }
  const commitment = paymentCommitment(receipt.key, expected.slot, receipt.blinding);
  if (commitment.toLowerCase() !== receipt.commitment.toLowerCase()) {
    return "it does not open its own commitment";
  }
  const onChain = await read(receipt.key);
  if (onChain.state === 0) return "the vault collected no such payment";
  if (onChain.commitment.toLowerCase() !== commitment.toLowerCase()) {
    return "the vault bound this payment to another slot";
  }
  if (onChain.amount !== BigInt(receipt.amount) || onChain.day !== receipt.day) {
    return `the vault recorded ${onChain.amount} on day ${onChain.day}`;
  }
  return null;
}

/** The vault's `payment(key)` through any viem public client. */
export function vaultPaymentReader(
  client: {
    readContract(args: {
      address: Address;
      abi: typeof merchantVaultAbi;
      functionName: "payment";
      args: [Hex];
    }): Promise<readonly [Address, bigint, number, number, Hex]>;
  },
  vault: Address,
): (key: Hex) => Promise<VaultPayment> {
  return async (key) => {
    const [, amount, day, state, commitment] = await client.readContract({
      address: vault,
      abi: merchantVaultAbi,
      functionName: "payment",
      args: [key],
    });
    return { amount, day: Number(day), state: Number(state), commitment };
  };
}

/** A vault transaction a merchant's own tool sends. */
export interface VaultCall {
  to: Address;
  data: Hex;
}

/**
 * `challenge(day, slot, openings)`: presents these receipts (all of one
 * day and slot) against the slot's credit of that day. Anyone may send it;
 * it names the slot and these payments on-chain, not the merchant.
 */
export function challengeCall(vault: Address, receipts: readonly ConfidentialReceipt[]): VaultCall {
  const first = receipts[0];
  if (!first) throw new Error("a challenge presents at least one receipt");
  if (receipts.some((r) => r.day !== first.day || r.slot !== first.slot)) {
    throw new Error("a challenge presents receipts of one day and one slot");
  }
  return {
    to: getAddress(vault),
    data: encodeFunctionData({
      abi: merchantVaultAbi,
      functionName: "challenge",
      args: [
        BigInt(first.day),
        BigInt(first.slot),
        receipts.map((r) => ({ key: r.key, blinding: r.blinding })),
      ],
    }),
  };
}

/** `redeem(key, slot, blinding)`: credits a payment of a late or disputed day to its slot. */
export function redeemCall(vault: Address, receipt: ConfidentialReceipt): VaultCall {
  return {
    to: getAddress(vault),
    data: encodeFunctionData({
      abi: merchantVaultAbi,
      functionName: "redeem",
      args: [receipt.key, BigInt(receipt.slot), receipt.blinding],
    }),
  };
}

/** `cancelWithdraw(id)`: the withdrawal address undoes a debit left unfinalized for 24 hours. */
export function cancelCall(vault: Address, withdrawalId: bigint): VaultCall {
  return {
    to: getAddress(vault),
    data: encodeFunctionData({
      abi: merchantVaultAbi,
      functionName: "cancelWithdraw",
      args: [withdrawalId],
    }),
  };
}
