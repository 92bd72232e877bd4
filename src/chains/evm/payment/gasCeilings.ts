/**
 * The most gas each payment shape may be given: a small factor above what
 * the shape honestly costs on the devnet, plus a bounded allowance for a
 * contract wallet's signature check.
 *
 * A payer whose address carries code (an ERC-1271 wallet, an EOA with an
 * EIP-7702 delegation) runs that code inside our transaction, at our cost.
 * Without a per-shape ceiling the only bound was `EVM_MAX_GAS_PER_TX`
 * (3M by default), forty times an honest USDC transfer: a wallet could burn
 * it in its signature check, and an estimate inflated that way became every
 * later payer's limit. With one, a settle that would need more is refused
 * before anything is sent (`gas_limit_too_high`), and one whose payer's code
 * behaves differently on-chain than in our simulation costs at most the
 * ceiling. The figures and how they were measured are in docs/chains/evm.md.
 */
import type { Hex } from "viem";

/**
 * Gas a contract wallet's signature check may take on top of a shape's own
 * cost: a passkey (P-256) check in Solidity, the costliest common one, is
 * about 200k; a Safe or a Coinbase Smart Wallet with an ECDSA owner is under
 * 20k, and a passkey check through the P-256 precompile (RIP-7212, on most
 * L2s) a few thousand, both inside the shape's own factor of two. Granted
 * only where it cannot be a weapon: unknown code at a payer with no settled
 * payment could otherwise burn it, at our cost, on every failure.
 */
const SIGNATURE_CHECK_ALLOWANCE = 250_000n;

/**
 * The most gas a payer's sponsored `approve(Permit2, …)` may ask: an
 * ERC-20 approve costs 46k on the devnet (a first allowance, cold slot);
 * twice that leaves room for tokens with a little more bookkeeping. It runs
 * from the payer's own account, so no signature check is added. For the
 * approval sponsor's checks of the approve it relays.
 * @public
 */
export const APPROVE_RELAY_GAS_CEILING = 100_000n;

/**
 * The funding of a sponsored approve: a plain value transfer to an address
 * without code costs exactly this, and nothing else is ever sent with it.
 * @public
 */
export const PLAIN_TRANSFER_GAS = 21_000n;

/**
 * A counterfactual (ERC-6492) wallet's deployment through an allowed
 * factory: the devnet's factory deploys its wallet for about 150k; smart
 * wallet factories on mainnet (proxies with an initializer) are 250-350k.
 */
export const WALLET_DEPLOY_GAS_CEILING = 600_000n;

/** A shape's honest cost on the devnet, and the ceiling kept for it. */
interface Shape {
  name: string;
  /** The honest cost times the factor: the most any payer's call of it is given. */
  own: bigint;
  /** Contract-wallet signature checks it makes: each may add the allowance. */
  signatureChecks: bigint;
  /**
   * The most a limit learned from one call is kept for the others of the
   * shape: the honest cost times the factor, without the signature
   * allowance, so one contract wallet's costly check never raises the limit
   * every later payer gets. Absent for shapes whose cost grows with input.
   */
  remembered?: bigint;
  /**
   * Extra gas per byte of calldata past the first 1,000, for the shapes
   * whose work grows with their input (a batch of voucher claims).
   */
  perByte?: bigint;
}

/** Factor above the honest cost, before the signature allowance. */
const FACTOR = 2n;
const shape = (name: string, honest: bigint, signatureChecks = 1n): Shape => ({
  name,
  own: honest * FACTOR,
  signatureChecks,
  remembered: honest * FACTOR,
});
/** A shape whose work grows with its calldata: nothing is remembered past the ceiling. */
const growing = (name: string, honest: bigint, signatureChecks = 1n): Shape => ({
  name,
  own: honest * FACTOR,
  signatureChecks,
  perByte: 800n,
});

/**
 * By function selector (the first four bytes of the calldata). The honest
 * figures are gas used on the devnet by an EOA payer, the first payment to
 * a fresh `payTo` (the costlier, cold case).
 */
const SHAPES: ReadonlyMap<string, Shape> = new Map([
  // USDC's EIP-3009 transfer, (v, r, s) and (bytes signature) forms.
  ["0xe3ee160e", shape("EIP-3009 transferWithAuthorization", 80_000n)],
  ["0xcf092995", shape("EIP-3009 transferWithAuthorization (bytes)", 80_000n)],
  // The x402 Permit2 proxies: a Permit2 signature transfer, and the same
  // after spending an EIP-2612 permit (two signature checks).
  ["0x13cd3b53", shape("exact Permit2 proxy settle", 110_000n)],
  ["0xfa340378", shape("exact Permit2 proxy settleWithPermit", 150_000n, 2n)],
  ["0xff11e7b4", shape("upto Permit2 proxy settle", 115_000n)],
  ["0x016c1748", shape("upto Permit2 proxy settleWithPermit", 155_000n, 2n)],
  // batch-settlement: a deposit moves the payer's tokens through a collector
  // (EIP-3009 or Permit2) and opens or tops up a channel.
  ["0x140f1e75", shape("batch-settlement deposit", 170_000n)],
  // Claims carry one voucher signature each: the work grows with the batch.
  ["0xe43ce1f2", growing("batch-settlement claimWithSignature", 110_000n)],
  ["0x29237b0c", growing("batch-settlement claim", 100_000n)],
  ["0xac9650d8", growing("batch-settlement multicall", 160_000n, 2n)],
  ["0x9db32a8f", shape("batch-settlement settle", 60_000n, 0n)],
  ["0xb77433e9", shape("batch-settlement refundWithSignature", 90_000n)],
]);

/** Unknown shapes (a confidential vault's collect, say) keep the operator's ceiling alone. */
export function shapeOf(data: Hex): Shape | undefined {
  return SHAPES.get(data.slice(0, 10).toLowerCase());
}

/**
 * The most gas a call may be given: its shape's ceiling, under the
 * operator's `EVM_MAX_GAS_PER_TX` (which also bounds what no shape names).
 * The contract-wallet allowance is added only when `signatureAllowance` is
 * granted (payerCode.ts decides: a payer without code, a known wallet
 * implementation, or a payer with a settled payment on record).
 */
export function gasCeilingFor(
  data: Hex,
  operatorCeiling: bigint | undefined,
  signatureAllowance = true,
): bigint | undefined {
  const s = shapeOf(data);
  if (!s) return operatorCeiling;
  const bytes = BigInt(Math.max(0, (data.length - 2) / 2 - 1_000));
  const allowance = signatureAllowance ? SIGNATURE_CHECK_ALLOWANCE * s.signatureChecks : 0n;
  const own = s.own + allowance + (s.perByte ?? 0n) * bytes;
  return operatorCeiling !== undefined && operatorCeiling < own ? operatorCeiling : own;
}
