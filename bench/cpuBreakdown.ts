/**
 * Where a profiled process's CPU went: self time summed by category, by
 * package and by function, each as a share of busy (non-idle) time. Shared
 * by the benchmark report and the profile-summary CLI.
 */
import type { FrameTime, SelfTimes } from "./cpuProfile.js";
import { categoryOf, functionLabel, packageOf, type Category } from "./profileCategories.js";

export interface Share<K> {
  key: K;
  ms: number;
  /** Of busy time, 0–1. */
  share: number;
}

/** A function, with the category its time counted for (a native one can count for several). */
interface FunctionKey {
  label: string;
  category: Category;
}

export interface CpuBreakdown {
  totalMs: number;
  busyMs: number;
  byCategory: Share<Category>[];
  byPackage: Share<string>[];
  byFunction: Share<FunctionKey>[];
}

export function breakdown(times: SelfTimes): CpuBreakdown {
  const busyMs = times.totalMs - times.idleMs;
  // Keys are compared by an id string, so object keys (a function and its
  // category) add up too.
  const sum = <K>(keyOf: (t: FrameTime) => K, idOf: (k: K) => string): Share<K>[] => {
    const acc = new Map<string, { key: K; ms: number }>();
    for (const t of times.frames) {
      const key = keyOf(t);
      const id = idOf(key);
      const entry = acc.get(id) ?? { key, ms: 0 };
      entry.ms += t.ms;
      acc.set(id, entry);
    }
    return [...acc.values()]
      .map(({ key, ms }) => ({ key, ms, share: busyMs > 0 ? ms / busyMs : 0 }))
      .sort((a, b) => b.ms - a.ms);
  };
  const same = (s: string) => s;
  return {
    totalMs: times.totalMs,
    busyMs,
    byCategory: sum(categoryOf, same),
    byPackage: sum((t) => packageOf(t.frame), same),
    byFunction: sum(
      (t) => ({ label: functionLabel(t.frame), category: categoryOf(t) }),
      (k) => `${k.label}\n${k.category}`,
    ),
  };
}

/** The share of `key` in a list (0 when absent). */
export const shareOf = <K>(list: readonly Share<K>[], key: K): number =>
  list.find((s) => s.key === key)?.share ?? 0;
