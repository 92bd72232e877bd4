/**
 * A small seedable generator (mulberry32) for fuzz tests, so a failure is
 * reproducible from the seed the test prints. `FUZZ_SEED` picks another.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed for this run: FUZZ_SEED when set, else the fixed default (printed either way). */
export function fuzzSeed(name: string, fallback: number): number {
  const seed = Number(process.env["FUZZ_SEED"] ?? fallback);
  console.log(`${name}: fuzz seed ${seed} (FUZZ_SEED=${seed} replays it)`);
  return seed;
}
