/**
 * A server's CPU profile, as the benchmark report uses it: read once the
 * server has exited, every thread's (the main thread and any worker, such
 * as one running the database), summed over the benchmark's phases only
 * (start-up and shutdown are not what is measured); or the reason there is
 * none.
 */
import { breakdown, type CpuBreakdown } from "./cpuBreakdown.js";
import {
  combine,
  coversAny,
  readCpuProfile,
  selfTimes,
  threadProfiles,
  type CpuProfile,
  type TimeWindow,
} from "./cpuProfile.js";
import { STOP_GRACE_MS, type ServerExit } from "./harness.js";

export interface Phase {
  label: string;
  /** One or more spans (a phase run in rounds, alternating with the other server, has several). */
  windows: readonly TimeWindow[];
}

interface ProfiledPhase {
  label: string;
  seconds: number;
  /** All threads together. */
  cpu: CpuBreakdown;
  /** Busy time of each thread, the main thread first. */
  threadBusyMs: number[];
}

export type ServerProfile =
  | {
      ok: true;
      phases: ProfiledPhase[];
      /** All phases and threads together. */
      overall: CpuBreakdown;
      /** Set when the phases could not be found in the profile and it was summed whole. */
      note?: string;
      /** How it stopped: SIGTERM to exit, and its exit code. */
      stopped: string;
    }
  | { ok: false; why: string };

/** Why a server that ended this way left no profile, or undefined if it should have one. */
function noProfileBecause(exit: ServerExit | undefined): string | undefined {
  if (exit?.forced) {
    return `no CPU profile: the server did not exit within ${STOP_GRACE_MS / 1000} s of SIGTERM and was killed (SIGKILL), so none was written`;
  }
  if (exit?.early) {
    return `no CPU profile: the server ended during the run (${exit.signal ?? `exit code ${exit.code}`})`;
  }
  if (exit?.signal) {
    return `no CPU profile: the server ended on ${exit.signal} instead of exiting after SIGTERM`;
  }
  return undefined;
}

export function serverProfile(
  dir: string,
  exit: ServerExit | undefined,
  phases: readonly Phase[],
): ServerProfile {
  const why = noProfileBecause(exit);
  if (why) return { ok: false, why };
  const files = threadProfiles(dir);
  if (files.length === 0) {
    return { ok: false, why: `no CPU profile in ${dir} (exit code ${exit?.code ?? "?"})` };
  }
  let profiles: CpuProfile[];
  try {
    profiles = files.map((f) => readCpuProfile(f.path));
  } catch (e) {
    return { ok: false, why: `CPU profile unreadable: ${(e as Error).message}` };
  }
  const stopped = exit
    ? `exited ${(exit.stopMs / 1000).toFixed(1)} s after SIGTERM, code ${exit.code}`
    : "exit not observed";
  const windows = phases.flatMap((p) => p.windows);
  // The windows come from this process's clock; should it not be the
  // profiles', summing them whole is the honest fallback.
  if (!profiles.some((p) => coversAny(p, windows))) {
    return {
      ok: true,
      phases: [],
      overall: breakdown(combine(profiles.map((p) => selfTimes(p)))),
      note: "the phases' times are not in the profile, so it is summed whole, start-up included",
      stopped,
    };
  }
  return {
    ok: true,
    phases: phases.map((phase) => {
      const threads = profiles.map((p) => selfTimes(p, phase.windows));
      return {
        label: phase.label,
        seconds: phase.windows.reduce((sum, w) => sum + (w.toUs - w.fromUs) / 1e6, 0),
        cpu: breakdown(combine(threads)),
        threadBusyMs: threads.map((t) => t.totalMs - t.idleMs),
      };
    }),
    overall: breakdown(combine(profiles.map((p) => selfTimes(p, windows)))),
    stopped,
  };
}
