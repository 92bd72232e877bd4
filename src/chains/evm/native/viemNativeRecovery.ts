/**
 * Routes viem's ECDSA public-key recovery to the native libsecp256k1.
 *
 * Why: `@x402/evm` checks an EOA's EIP-3009 / Permit2 signature by calling
 * viem's `recoverAddress` itself; it never calls the signer's
 * `verifyTypedData` hook. viem recovers with noble's pure-JS curve arithmetic,
 * which the benchmark's CPU profile shows as the largest single cost of a
 * verification (about 40% of the service's CPU under verify load).
 *
 * How: viem calls `Signature#recoverPublicKey` on the noble module instance
 * it imports. That one method is replaced by a version that computes the same
 * point with libsecp256k1 and falls back to noble's own code for anything it
 * does not handle identically (recovery ids 2 and 3, hashes that are not 32
 * bytes, and every failure, so errors stay noble's errors). Nothing on disk
 * changes. The switch checks itself at start (a known signature must recover
 * to its signer through viem, and through the native path) and stays off if
 * anything does not match, e.g. after a viem upgrade that moves its noble.
 * `EVM_NATIVE_RECOVERY=false` leaves viem untouched.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import native from "secp256k1";
import { keccak256, recoverAddress, toHex } from "viem";

interface NoblePoint {
  toHex(compressed?: boolean): string;
}
interface NobleSignature {
  readonly r: bigint;
  readonly s: bigint;
  readonly recovery?: number;
  recoverPublicKey(msgHash: unknown): NoblePoint;
}
interface NobleSecp256k1 {
  Signature: { prototype: NobleSignature };
}

export type NativeRecoveryState =
  { active: true; nativeCalls: () => number } | { active: false; why: string };

const HASH_HEX = /^(?:0x)?([0-9a-fA-F]{64})$/;

function hashBytes(msgHash: unknown): Uint8Array | undefined {
  if (msgHash instanceof Uint8Array) return msgHash.length === 32 ? msgHash : undefined;
  if (typeof msgHash !== "string") return undefined;
  const m = HASH_HEX.exec(msgHash);
  return m ? Buffer.from(m[1]!, "hex") : undefined;
}

function bigintTo32Bytes(n: bigint, out: Uint8Array, offset: number): void {
  const hex = n.toString(16).padStart(64, "0");
  out.set(Buffer.from(hex, "hex"), offset);
}

/**
 * The noble secp256k1 module instance that viem's recovery imports (a
 * sentence saying why not, when it cannot be found). Exported for its test.
 */
export async function viemsNoble(): Promise<NobleSecp256k1 | string> {
  const require = createRequire(import.meta.url);
  const fromViem = createRequire(require.resolve("viem/package.json"));
  let nobleDir: string;
  try {
    // The package exports no package.json; its CommonJS entry sits at the root.
    nobleDir = dirname(fromViem.resolve("@noble/curves/secp256k1"));
  } catch {
    return "viem's @noble/curves could not be located";
  }
  const file = join(nobleDir, "esm", "secp256k1.js");
  if (!existsSync(file)) return `no ESM secp256k1 module at @noble/curves/esm`;
  const mod = (await import(pathToFileURL(file).href)) as { secp256k1?: NobleSecp256k1 };
  const curve = mod.secp256k1;
  if (typeof curve?.Signature?.prototype?.recoverPublicKey !== "function") {
    return "noble's Signature has no recoverPublicKey";
  }
  return curve;
}

/**
 * The recovered key as viem reads it: `toHex(false)`, nothing else. noble's
 * own point would parse the 65 bytes into field elements, check the curve
 * equation and encode them back, a few per cent of a verification, for a key
 * libsecp256k1 has just produced on the curve. A viem that asked for more
 * would fail the self-check below, which then leaves noble's path in place.
 */
class RecoveredPoint implements NoblePoint {
  constructor(private readonly uncompressed: Uint8Array) {}

  toHex(compressed = true): string {
    if (!compressed) return Buffer.from(this.uncompressed).toString("hex");
    const prefix = (this.uncompressed[64]! & 1) === 1 ? "03" : "02";
    return prefix + Buffer.from(this.uncompressed.subarray(1, 33)).toString("hex");
  }
}

let state: NativeRecoveryState | undefined;

/** Installs the native path once per process; later calls return the first outcome. */
export async function routeViemRecoveryToNative(): Promise<NativeRecoveryState> {
  if (state) return state;
  const curve = await viemsNoble();
  if (typeof curve === "string") return (state = { active: false, why: curve });
  const proto = curve.Signature.prototype;
  const original = proto.recoverPublicKey;
  let calls = 0;
  const compact = new Uint8Array(64);

  proto.recoverPublicKey = function nativeRecoverPublicKey(
    this: NobleSignature,
    msgHash: unknown,
  ): NoblePoint {
    const hash = hashBytes(msgHash);
    const rec = this.recovery;
    if (!hash || (rec !== 0 && rec !== 1)) return original.call(this, msgHash);
    let publicKey: Uint8Array;
    try {
      bigintTo32Bytes(this.r, compact, 0);
      bigintTo32Bytes(this.s, compact, 32);
      publicKey = native.ecdsaRecover(compact, rec, hash, false);
    } catch {
      // Let noble decide and word the failure exactly as before.
      return original.call(this, msgHash);
    }
    calls++;
    return new RecoveredPoint(publicKey);
  };

  // Self-check through viem's public API, the path @x402/evm takes.
  const known = { hash: keccak256(toHex("x402 native recovery self-check")) };
  try {
    const { privateKeyToAccount } = await import("viem/accounts");
    // Any fixed key will do; this one is the curve's smallest.
    const signer = privateKeyToAccount(`0x${"0".repeat(63)}1`);
    const signature = await signer.sign({ hash: known.hash });
    const before = calls;
    const recovered = await recoverAddress({ hash: known.hash, signature });
    if (recovered !== signer.address || calls !== before + 1) {
      proto.recoverPublicKey = original;
      return (state = {
        active: false,
        why: "self-check failed: viem did not recover through the native path",
      });
    }
  } catch (e) {
    proto.recoverPublicKey = original;
    return (state = { active: false, why: `self-check failed: ${(e as Error).message}` });
  }
  return (state = { active: true, nativeCalls: () => calls });
}
