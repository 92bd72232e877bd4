/**
 * viem's keccak-256 on the native path: the same digests as an independent
 * implementation (the `keccak` package's pure-JS one) for one-shot hashes,
 * typed data and addresses; noble's other uses (several updates, a reused
 * buffer, a clone, SHA3-256) still give their own right answers; and a
 * signature still verifies through viem.
 */
import { before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import { getAddress, hashTypedData, keccak256, recoverTypedDataAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { keccak_256, sha3_256 } from "@noble/hashes/sha3";
import { routeViemKeccakToNative, type NativeKeccakState } from "./viemNativeKeccak.js";

type Hasher = { update(data: Buffer): Hasher; digest(): Buffer };
const pureJs = createRequire(import.meta.url)("keccak/js") as (name: string) => Hasher;
const independent = (data: Uint8Array) =>
  `0x${pureJs("keccak256").update(Buffer.from(data)).digest().toString("hex")}`;
const hex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString("hex")}`;
const bytesOf = (length: number, seed: number) =>
  new Uint8Array(length).map((_, i) => (i * 97 + seed * 13) & 0xff);

describe("native keccak-256 inside viem", () => {
  let state: NativeKeccakState;
  before(async () => {
    state = await routeViemKeccakToNative();
  });

  test("is active here, and one-shot hashes of every length around the block size match", () => {
    assert.equal(state.active, true, state.active ? "" : state.why);
    if (!state.active) return;
    const before = state.nativeCalls();
    for (let length = 0; length <= 420; length += 1) {
      const data = bytesOf(length, length);
      assert.equal(keccak256(data), independent(data), `${length} bytes`);
    }
    assert.ok(state.nativeCalls() - before >= 421, "every one of them went native");
  });

  test("typed data and address checksums are unchanged", () => {
    const domain = {
      name: "USD Coin",
      version: "2",
      chainId: 8453,
      verifyingContract: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    } as const;
    const types = {
      TransferWithAuthorization: [
        { name: "from", type: "address" },
        { name: "to", type: "address" },
        { name: "value", type: "uint256" },
      ],
    } as const;
    const message = {
      from: "0x1111111111111111111111111111111111111111",
      to: "0x2222222222222222222222222222222222222222",
      value: 1000n,
    } as const;
    const digest = hashTypedData({
      domain,
      types,
      primaryType: "TransferWithAuthorization",
      message,
    });
    // The same digest, built by hand from the EIP-712 definition with the
    // independent hash.
    const word = (h: string) => h.slice(2);
    const pad = (h: string) => h.slice(2).toLowerCase().padStart(64, "0");
    const text = (s: string) => independent(Buffer.from(s));
    const domainHash = independent(
      Buffer.from(
        word(
          text(
            "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)",
          ),
        ) +
          word(text("USD Coin")) +
          word(text("2")) +
          pad("0x2105") +
          pad(domain.verifyingContract),
        "hex",
      ),
    );
    const structHash = independent(
      Buffer.from(
        word(text("TransferWithAuthorization(address from,address to,uint256 value)")) +
          pad(message.from) +
          pad(message.to) +
          pad("0x3e8"),
        "hex",
      ),
    );
    const expected = independent(Buffer.from(`1901${word(domainHash)}${word(structHash)}`, "hex"));
    assert.equal(digest, expected);
    // EIP-55 by hand: a letter is upper case where the hash's nibble is 8 or more.
    for (let seed = 0; seed < 20; seed++) {
      const lower = Buffer.from(bytesOf(20, seed)).toString("hex");
      const nibbles = independent(Buffer.from(lower)).slice(2);
      const expected = [...lower]
        .map((c, i) => (parseInt(nibbles[i]!, 16) >= 8 ? c.toUpperCase() : c))
        .join("");
      assert.equal(getAddress(`0x${lower}`), `0x${expected}`);
    }
  });

  test("noble's other uses keep their own answers", () => {
    const a = bytesOf(150, 1);
    const b = bytesOf(90, 2);
    const joined = new Uint8Array([...a, ...b]);
    // Two updates.
    assert.equal(hex(keccak_256.create().update(a).update(b).digest()), independent(joined));
    // A buffer reused by its owner between update and digest.
    const reused = a.slice();
    const h = keccak_256.create().update(reused);
    reused.fill(0);
    assert.equal(hex(h.digest()), independent(a));
    // A clone taken after the first update goes on separately.
    const first = keccak_256.create().update(a);
    const second = first.clone().update(b);
    assert.equal(hex(first.digest()), independent(a));
    assert.equal(hex(second.digest()), independent(joined));
    // SHA3-256 (a different padding) is untouched.
    assert.equal(hex(sha3_256(joined)), `0x${createHash("sha3-256").update(joined).digest("hex")}`);
    // A digest twice is refused, as noble refuses it.
    const once = keccak_256.create().update(a);
    once.digest();
    assert.throws(() => once.digest());
  });

  test("a typed-data signature still recovers its signer", async () => {
    const account = privateKeyToAccount(`0x${"11".repeat(32)}` as Hex);
    const typed = {
      domain: { name: "x", version: "1", chainId: 1 },
      types: { M: [{ name: "v", type: "uint256" }] },
      primaryType: "M",
      message: { v: 7n },
    } as const;
    const signature = await account.signTypedData(typed);
    assert.equal(await recoverTypedDataAddress({ ...typed, signature }), account.address);
  });
});
