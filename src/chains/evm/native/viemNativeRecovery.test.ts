/**
 * The native route for viem's recovery must be indistinguishable from
 * noble's own: same address for every valid signature (low and high s, both
 * recovery bits), and a failure wherever noble fails.
 */
import { before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { recoverAddress, recoverPublicKey, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import {
  routeViemRecoveryToNative,
  viemsNoble,
  type NativeRecoveryState,
} from "./viemNativeRecovery.js";

interface NoblePointLike {
  toHex(compressed?: boolean): string;
}

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const hex32 = (n: bigint) => n.toString(16).padStart(64, "0");

/** What noble alone says, computed before the route is installed. */
async function outcome(hash: Hex, signature: Hex): Promise<string> {
  try {
    return await recoverPublicKey({ hash, signature });
  } catch {
    return "error";
  }
}

describe("viem recovery routed to libsecp256k1", () => {
  const cases: { hash: Hex; signature: Hex }[] = [];
  const expected: string[] = [];
  let state: NativeRecoveryState;

  before(async () => {
    for (let i = 0; i < 200; i++) {
      const account = privateKeyToAccount(generatePrivateKey());
      const hash = `0x${randomBytes(32).toString("hex")}` as Hex;
      const signature = await account.sign({ hash });
      cases.push({ hash, signature });
      // The malleable twin: s' = n - s with the other recovery bit.
      const s = BigInt(`0x${signature.slice(66, 130)}`);
      const v = parseInt(signature.slice(130), 16);
      cases.push({
        hash,
        signature:
          `${signature.slice(0, 66)}${hex32(N - s)}${(v === 27 ? 28 : 27).toString(16)}` as Hex,
      });
    }
    // Garbage noble must refuse or map: r = 0, s = 0, s = n, r not on the curve, random.
    const h = `0x${"11".repeat(32)}` as Hex;
    cases.push({ hash: h, signature: `0x${hex32(0n)}${hex32(5n)}1b` });
    cases.push({ hash: h, signature: `0x${hex32(5n)}${hex32(0n)}1b` });
    cases.push({ hash: h, signature: `0x${hex32(5n)}${hex32(N)}1c` });
    cases.push({ hash: h, signature: `0x${"ff".repeat(32)}${hex32(7n)}1b` });
    for (let i = 0; i < 50; i++) {
      cases.push({
        hash: `0x${randomBytes(32).toString("hex")}`,
        signature: `0x${randomBytes(64).toString("hex")}${i % 2 ? "1b" : "1c"}`,
      });
    }
    for (const c of cases) expected.push(await outcome(c.hash, c.signature));
    state = await routeViemRecoveryToNative();
  });

  test("installs, and viem's recoverAddress goes through the native path", async () => {
    assert.equal(state.active, true, state.active ? "" : state.why);
    if (!state.active) return;
    const account = privateKeyToAccount(generatePrivateKey());
    const hash = `0x${"22".repeat(32)}` as Hex;
    const before = state.nativeCalls();
    assert.equal(
      await recoverAddress({ hash, signature: await account.sign({ hash }) }),
      account.address,
    );
    assert.equal(state.nativeCalls(), before + 1);
  });

  test("every case recovers exactly what noble recovered, or fails where noble failed", async () => {
    let errors = 0;
    for (const [i, c] of cases.entries()) {
      const got = await outcome(c.hash, c.signature);
      if (got === "error") errors++;
      assert.equal(got, expected[i], `case ${i}: ${c.signature}`);
    }
    assert.ok(errors >= 3, "the garbage cases include failures");
  });

  test("the recovered key reads the same as noble's point, compressed or not", async () => {
    // viem's own noble instance, the one the route patches.
    const found = await viemsNoble();
    assert.notEqual(typeof found, "string", String(found));
    const secp256k1 = found as unknown as {
      Signature: {
        fromCompact(hex: string): {
          addRecoveryBit(bit: number): { recoverPublicKey(hash: string): NoblePointLike };
        };
      };
      ProjectivePoint: { fromHex(hex: string): NoblePointLike };
    };
    for (const c of cases.slice(0, 40)) {
      const bit = parseInt(c.signature.slice(130), 16) - 27;
      const point = secp256k1.Signature.fromCompact(c.signature.slice(2, 130))
        .addRecoveryBit(bit)
        .recoverPublicKey(c.hash.slice(2));
      const noble = secp256k1.ProjectivePoint.fromHex(point.toHex(false));
      assert.equal(point.toHex(false), noble.toHex(false));
      assert.equal(point.toHex(true), noble.toHex(true));
      assert.equal(point.toHex(), noble.toHex());
    }
  });

  test("a second install is a no-op that reports the first outcome", async () => {
    assert.equal(await routeViemRecoveryToNative(), state);
  });
});
