/**
 * The machine's speed, measured the same way before every run: ms to sign
 * one EIP-3009 authorization as a payer signs it (its EIP-712 keccak
 * hashing and a secp256k1 signature), a fixed piece of work that depends
 * on nothing but the CPU it gets. Reported beside a run's figures, it says
 * whether a machine that settled more slowly was itself slower (a shared
 * machine's other work, another processor): the same code on a machine
 * half as fast shows about twice the ms here.
 */
import { authorizationTypes } from "@x402/evm";
import { privateKeyToAccount } from "viem/accounts";

// A fixed key and payment: the yardstick's work never changes.
const PAYER = privateKeyToAccount(`0x${"11".repeat(32)}`);
const AUTHORIZATION = {
  domain: {
    name: "USD Coin",
    version: "2",
    chainId: 8453,
    verifyingContract: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
  },
  types: authorizationTypes,
  primaryType: "TransferWithAuthorization",
  message: {
    from: PAYER.address,
    to: "0x000000000000000000000000000000000000dEaD",
    value: 10_000n,
    validAfter: 0n,
    validBefore: 1_900_000_000n,
    nonce: `0x${"22".repeat(32)}`,
  },
} as const;

/** What `measureYardstick` found: the median of its rounds, and their spread. */
export interface Yardstick {
  /** ms per authorization signed, the median round's. */
  msPerSignature: number;
  /** The fastest and slowest rounds' ms per signature. */
  min: number;
  max: number;
}

/** Signs `rounds` rounds of `perRound` authorizations (after a warm-up) and times each round. */
export async function measureYardstick(rounds = 5, perRound = 100): Promise<Yardstick> {
  const sign = () => PAYER.signTypedData(AUTHORIZATION);
  // Warm: the first signatures compile the curve's code and fill its tables.
  for (let i = 0; i < perRound; i++) await sign();
  const perSignature: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const started = performance.now();
    for (let i = 0; i < perRound; i++) await sign();
    perSignature.push((performance.now() - started) / perRound);
  }
  perSignature.sort((a, b) => a - b);
  return {
    msPerSignature: perSignature[Math.floor(perSignature.length / 2)]!,
    min: perSignature[0]!,
    max: perSignature[perSignature.length - 1]!,
  };
}

/** The yardstick as a report's line says it. */
export function yardstickLine(y: Yardstick): string {
  return `Machine speed (a fixed yardstick, measured in the bench's process before the run): ${y.msPerSignature.toFixed(3)} ms per EIP-3009 authorization signed (EIP-712 keccak hashing and a secp256k1 signature; rounds ${y.min.toFixed(3)}–${y.max.toFixed(3)} ms; lower is a faster machine).`;
}
