/**
 * Routes viem's keccak-256 to the native implementation of the `keccak`
 * package (the Keccak team's reference code, built for Node).
 *
 * Why: every verification hashes its EIP-712 typed data (type hashes, the
 * domain, the message, the digest) and checksums addresses, each a
 * keccak-256 that viem computes with noble's pure-JS permutation. Once
 * signature recovery went native, that permutation became the largest single
 * cost of a verification in the benchmark's CPU profile (about a fifth of
 * the service's busy time); natively a short hash costs a few times less.
 *
 * How: viem hashes with `keccak_256` from the `@noble/hashes` instance it
 * imports, which makes a `Keccak` object, feeds it once with `update` and
 * reads it with `digest`. On that class, the first `update` of a fresh
 * keccak-256 object only keeps the bytes, and `digest` hashes them natively.
 * Anything else (a second `update`, a clone, an extendable output, any other
 * Keccak variant such as SHA3-256) first feeds the kept bytes through noble's
 * own code and then runs it unchanged, so every use outside the one-shot
 * pattern behaves exactly as before. Nothing on disk changes. A self-check
 * at start compares native and noble results through viem's public
 * `keccak256` on inputs around the block size, and the switch stays off if
 * anything differs or if the native build is missing. `EVM_NATIVE_KECCAK=false`
 * leaves viem untouched.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { keccak256 } from "viem";

/** The native sponge state of the `keccak` package (its N-API binding). */
interface NativeState {
  initialize(rate: number, capacity: number): void;
  absorb(data: Buffer): void;
  absorbLastFewBits(bits: number): void;
  squeeze(length: number): Buffer;
}

/** Bytes kept by the first update, until digest or another use. */
const KEPT = Symbol("nativeKeccakKept");
/** Set once an object went through noble's own code: it is noble's from then on. */
const NOBLE = Symbol("nativeKeccakNoble");

/** The fields and methods of noble's Keccak this module reads or wraps. */
interface NobleKeccak {
  blockLen: number;
  suffix: number;
  outputLen: number;
  enableXOF: boolean;
  rounds: number;
  finished: boolean;
  pos: number;
  state32: unknown;
  update(data: unknown): NobleKeccak;
  digestInto(out: Uint8Array): Uint8Array;
  destroy(): void;
  [KEPT]?: Uint8Array | undefined;
  [NOBLE]?: boolean;
  [key: string]: unknown;
}

type KeccakClass = { prototype: NobleKeccak };

export type NativeKeccakState =
  { active: true; nativeCalls: () => number } | { active: false; why: string };

// keccak-256: a 136-byte block (rate 1088 bits, capacity 512), padding
// suffix 0x01 (Keccak's, where SHA3-256 has 0x06), 32 bytes out.
const RATE_BITS = 1088;
const CAPACITY_BITS = 512;
const BLOCK_BYTES = 136;
const SUFFIX = 0x01;
const OUT_BYTES = 32;

function nativeState(): NativeState | string {
  const require = createRequire(import.meta.url);
  try {
    const manifest = require.resolve("keccak/package.json");
    // The loader the package itself uses, from its own dependencies.
    const load = createRequire(manifest)("node-gyp-build") as (dir: string) => unknown;
    const dir = dirname(manifest);
    const State = load(dir) as new () => NativeState;
    if (typeof State !== "function") return "the keccak package has no native build here";
    return new State();
  } catch (e) {
    return `the keccak package's native build could not be loaded: ${(e as Error).message}`;
  }
}

/** The noble `Keccak` class that viem's `keccak256` uses. */
async function viemsKeccak(): Promise<KeccakClass | string> {
  const require = createRequire(import.meta.url);
  const fromViem = createRequire(require.resolve("viem/package.json"));
  let file: string;
  try {
    // The CommonJS entry sits at the package root; viem's ESM build imports
    // the ESM one beside it, and that module instance is the one to change.
    file = join(dirname(fromViem.resolve("@noble/hashes/sha3")), "esm", "sha3.js");
  } catch {
    return "viem's @noble/hashes could not be located";
  }
  const mod = (await import(pathToFileURL(file).href)) as { Keccak?: KeccakClass };
  const proto = mod.Keccak?.prototype;
  if (typeof proto?.update !== "function" || typeof proto.digestInto !== "function") {
    return "noble's Keccak has no update/digestInto";
  }
  return mod.Keccak!;
}

let state: NativeKeccakState | undefined;

/** Installs the native path once per process; later calls return the first outcome. */
export async function routeViemKeccakToNative(): Promise<NativeKeccakState> {
  if (state) return state;
  const sponge = nativeState();
  if (typeof sponge === "string") return (state = { active: false, why: sponge });
  const Keccak = await viemsKeccak();
  if (typeof Keccak === "string") return (state = { active: false, why: Keccak });

  const proto = Keccak.prototype;
  const wrapped = ["update", "digestInto", "_cloneInto", "writeInto", "finish", "xofInto"];
  const original = new Map(wrapped.map((name) => [name, proto[name]]));
  const call = (self: NobleKeccak, name: string, args: unknown[]) =>
    (original.get(name) as (...a: unknown[]) => unknown).apply(self, args);
  let calls = 0;

  const isKeccak256 = (k: NobleKeccak) =>
    k.blockLen === BLOCK_BYTES &&
    k.suffix === SUFFIX &&
    k.outputLen === OUT_BYTES &&
    !k.enableXOF &&
    k.rounds === 24;

  /**
   * Nothing absorbed yet: no position in the block and an all-zero state.
   * A clone, or an object fed before this module was installed, has state
   * and stays with noble.
   */
  const pristine = (k: NobleKeccak) => {
    if (k.finished || k.pos !== 0 || !(k.state32 instanceof Uint32Array)) return false;
    for (const word of k.state32) if (word !== 0) return false;
    return true;
  };

  /** Hands the object back to noble: its kept bytes go through noble's update. */
  const toNoble = (k: NobleKeccak) => {
    if (k[NOBLE]) return;
    k[NOBLE] = true;
    const kept = k[KEPT];
    k[KEPT] = undefined;
    if (kept) call(k, "update", [kept]);
  };

  proto.update = function (this: NobleKeccak, data: unknown): NobleKeccak {
    if (!this[NOBLE] && this[KEPT] === undefined && isKeccak256(this) && pristine(this)) {
      if (data instanceof Uint8Array) {
        // A copy: the caller may reuse its buffer before digest.
        this[KEPT] = data.slice();
        return this;
      }
    }
    toNoble(this);
    return call(this, "update", [data]) as NobleKeccak;
  };

  proto.digestInto = function (this: NobleKeccak, out: Uint8Array): Uint8Array {
    const kept = this[KEPT];
    if (
      !this[NOBLE] &&
      kept &&
      !this.finished &&
      out instanceof Uint8Array &&
      out.length >= OUT_BYTES
    ) {
      sponge.initialize(RATE_BITS, CAPACITY_BITS);
      sponge.absorb(Buffer.from(kept.buffer, kept.byteOffset, kept.byteLength));
      sponge.absorbLastFewBits(SUFFIX);
      out.set(sponge.squeeze(OUT_BYTES));
      this[KEPT] = undefined;
      this.finished = true;
      this.destroy();
      calls++;
      return out;
    }
    toNoble(this);
    return call(this, "digestInto", [out]) as Uint8Array;
  };

  for (const name of ["_cloneInto", "writeInto", "finish", "xofInto"]) {
    proto[name] = function (this: NobleKeccak, ...args: unknown[]): unknown {
      toNoble(this);
      return call(this, name, args);
    };
  }

  const restore = () => {
    for (const [name, fn] of original) proto[name] = fn;
  };

  // Self-check through viem's public keccak256: lengths around one and two
  // blocks, where padding goes wrong if it does, against noble's own result.
  try {
    for (const length of [0, 1, 31, 32, 33, 135, 136, 137, 271, 272, 273, 1000]) {
      const input = new Uint8Array(length).map((_, i) => (i * 151 + length) & 0xff);
      const before = calls;
      const viaViem = keccak256(input);
      const reference = new (Keccak as unknown as new (...a: unknown[]) => NobleKeccak)(
        BLOCK_BYTES,
        SUFFIX,
        OUT_BYTES,
      );
      reference[NOBLE] = true;
      call(reference, "update", [input]);
      const expected = call(reference, "digestInto", [new Uint8Array(OUT_BYTES)]) as Uint8Array;
      if (viaViem !== `0x${Buffer.from(expected).toString("hex")}` || calls !== before + 1) {
        restore();
        return (state = {
          active: false,
          why: `self-check failed at ${length} bytes: viem's keccak256 did not match noble through the native path`,
        });
      }
    }
  } catch (e) {
    restore();
    return (state = { active: false, why: `self-check failed: ${(e as Error).message}` });
  }
  return (state = { active: true, nativeCalls: () => calls });
}
