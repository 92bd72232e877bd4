/**
 * Reads V8 .cpuprofile files (what `node --cpu-prof` writes on exit, one per
 * thread: the main thread and each worker) and adds up the self time of each
 * sampled frame, optionally only inside given time windows, so a summary can
 * leave out start-up and shutdown.
 *
 * Sample times are V8's monotonic clock in microseconds, which on Linux is
 * the clock behind `process.hrtime` in every process (CLOCK_MONOTONIC): a
 * window taken in the benchmark process selects the server's samples.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";

export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A span of the monotonic clock, in microseconds (`process.hrtime.bigint() / 1000n`). */
export interface TimeWindow {
  fromUs: number;
  toUs: number;
}

/** Now, on the clock the profiles' sample times use. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** A frame's self time, with the frames that called it (nearest first). */
export interface FrameTime {
  frame: CallFrame;
  callers: readonly CallFrame[];
  ms: number;
}

export interface SelfTimes {
  /** Every sampled millisecond in the windows, idle included. */
  totalMs: number;
  idleMs: number;
  /** Self time per profile node (one node per distinct stack); idle left out. */
  frames: FrameTime[];
}

export function readCpuProfile(path: string): CpuProfile {
  return JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
}

/** A profile file Node wrote, and the thread it is of (0: the main thread). */
export interface ThreadProfileFile {
  path: string;
  threadId: number;
}

/**
 * The profiles `--cpu-prof` wrote into a directory, main thread first. Node
 * names them CPU.<date>.<time>.<pid>.<thread id>.<sequence>.cpuprofile; one
 * process per directory, since a fixed --cpu-prof-name would make every
 * thread write the same file.
 */
export function threadProfiles(dir: string): ThreadProfileFile[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.endsWith(".cpuprofile"))
    .map((n) => ({
      path: join(dir, n),
      threadId: Number(/\.(\d+)\.\d+\.cpuprofile$/.exec(n)?.[1] ?? NaN),
    }))
    .sort((a, b) => a.threadId - b.threadId);
}

/** Whether any window overlaps the time the profile covers. */
export function coversAny(profile: CpuProfile, windows: readonly TimeWindow[]): boolean {
  return windows.some((w) => w.fromUs < profile.endTime && w.toUs > profile.startTime);
}

/**
 * Self time per node. A sample stands for the time since the previous one
 * (its time delta), as DevTools counts it. Without windows, the whole profile.
 */
export function selfTimes(profile: CpuProfile, windows?: readonly TimeWindow[]): SelfTimes {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);

  const msById = new Map<number, number>();
  let totalMs = 0;
  let idleMs = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const deltaUs = profile.timeDeltas[i] ?? 0;
    at += deltaUs;
    if (windows && !windows.some((w) => at >= w.fromUs && at < w.toUs)) return;
    const ms = deltaUs / 1000;
    totalMs += ms;
    if (byId.get(id)?.callFrame.functionName === "(idle)") idleMs += ms;
    else msById.set(id, (msById.get(id) ?? 0) + ms);
  });

  const callersOf = (id: number): CallFrame[] => {
    const out: CallFrame[] = [];
    for (let p = parentOf.get(id); p !== undefined; p = parentOf.get(p)) {
      const node = byId.get(p);
      if (node) out.push(node.callFrame);
    }
    return out;
  };
  const frames = [...msById].map(([id, ms]) => ({
    frame: byId.get(id)!.callFrame,
    callers: callersOf(id),
    ms,
  }));
  return { totalMs, idleMs, frames };
}

/** Several threads' self times as one: their busy time adds up. */
export function combine(list: readonly SelfTimes[]): SelfTimes {
  return {
    totalMs: list.reduce((a, t) => a + t.totalMs, 0),
    idleMs: list.reduce((a, t) => a + t.idleMs, 0),
    frames: list.flatMap((t) => t.frames),
  };
}
