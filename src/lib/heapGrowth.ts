/**
 * How far V8 lets the heap grow before its next full collection.
 *
 * Under load nearly every request lives across a young-generation
 * collection (a verification waits milliseconds for its RPC batch), so its
 * garbage is promoted to the old generation. V8's default lets the old
 * generation grow to up to four times what survived the last full
 * collection before it collects again. Measured at about 1,300
 * verifications a second, the heap then reaches 170–210 MB of which some
 * 50 MB is live, and resident memory follows it: 300 MB on PostgreSQL,
 * 400 MB with the embedded database. A fixed factor of 1.5 holds the same
 * load at 180 and 250 MB, with no loss of throughput in alternating runs
 * (the extra full collections are incremental and concurrent, and short on
 * a 50 MB live heap).
 *
 * The flag is read each time V8 sets the next limit, so setting it at
 * start-up works as it does on the command line. An operator who passes
 * `--heap-growing-percent` to node keeps their own value.
 */
import { setFlagsFromString } from "node:v8";

const HEAP_GROWING_PERCENT = 50;

export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  const given = execArgv.some((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a));
  if (given) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
