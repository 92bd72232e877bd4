/**
 * The database's own CPU during a settle phase, which the server's CPU per
 * settlement leaves out or hides: on PostgreSQL, the server's processes
 * beside the service (`postgres`, read from /proc); on the embedded
 * database, its thread inside the service, from the service's CPU profile.
 */
import { cpuSecondsByCommand } from "./cpuShare.js";
import type { ServerProfile } from "./serverProfile.js";

/** PostgreSQL's processes, as `ps` and /proc name them. */
const POSTGRES_COMMAND = "postgres";

/**
 * CPU seconds the processes used between two readings: each process's last
 * reading less its first (0 for one started in between, whose whole time
 * counts). A process that exited keeps its last reading, so its time up to
 * then counts too.
 */
export function cpuSince(
  first: ReadonlyMap<number, number>,
  last: ReadonlyMap<number, number>,
): number {
  let sum = 0;
  for (const [pid, seconds] of last) sum += Math.max(0, seconds - (first.get(pid) ?? 0));
  return sum;
}

/**
 * Starts measuring the CPU of this machine's PostgreSQL server (every
 * process named `postgres`: its backends, writer and WAL processes),
 * read every `everyMs` so that a backend ending mid-phase still counts. The
 * returned function ends the phase and gives the CPU seconds, or undefined
 * when no such process runs here (a server on another machine). Other work
 * on the same server counts too.
 */
export function measurePostgresCpu(everyMs = 500): () => number | undefined {
  const first = cpuSecondsByCommand(POSTGRES_COMMAND);
  const last = new Map(first);
  const read = () => {
    for (const [pid, seconds] of cpuSecondsByCommand(POSTGRES_COMMAND)) last.set(pid, seconds);
  };
  const timer = setInterval(read, everyMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    read();
    return last.size === 0 ? undefined : cpuSince(first, last);
  };
}

/**
 * The embedded database's thread's busy ms in a profiled phase: the
 * service's first worker thread, since the database opens its thread at
 * start, before any verify thread (which starts only under load). Undefined
 * without a profile, without the phase, or on PostgreSQL (`embedded` false),
 * where no thread of the service is the database's.
 */
export function databaseThreadMs(
  profile: ServerProfile,
  phase: string,
  embedded: boolean,
): number | undefined {
  if (!embedded || !profile.ok) return undefined;
  return profile.phases.find((p) => p.label === phase)?.threadBusyMs[1];
}
