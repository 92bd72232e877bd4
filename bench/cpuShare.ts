/**
 * Who used the machine's CPU during a benchmark phase: the chain node (a
 * process of its own, named by the bench), the server under test and the load generator (this process).
 * On a small machine the three compete for the same cores, so a throughput
 * figure only means something next to where the CPU went; a server that sits
 * idle while the node is saturated is waiting on the node, not on itself.
 * Linux only (/proc); elsewhere the figures are absent.
 */
import { readFileSync, readdirSync } from "node:fs";

/** Clock ticks per second for /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

export interface CpuShare {
  /** Average cores busy over the phase. */
  node: number;
  server: number;
  loadGenerator: number;
}

function procStat(pid: number): { comm: string; ppid: number; cpuSeconds: number } | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, "utf8");
    // comm is parenthesised and may contain spaces: split after its closing paren.
    const close = raw.lastIndexOf(")");
    const comm = raw.slice(raw.indexOf("(") + 1, close);
    const fields = raw.slice(close + 2).split(" ");
    // After comm: state(0) ppid(1) … utime(11) stime(12).
    return {
      comm,
      ppid: Number(fields[1]),
      cpuSeconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
    };
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) a process has used so far; undefined where /proc is not. */
export function cpuSecondsOf(pid: number): number | undefined {
  return procStat(pid)?.cpuSeconds;
}

/** CPU seconds so far of every process on the machine named `command`, by pid (none where /proc is not). */
export function cpuSecondsByCommand(command: string): Map<number, number> {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return new Map();
  }
  const out = new Map<number, number>();
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const s = procStat(Number(e));
    if (s?.comm === command) out.set(Number(e), s.cpuSeconds);
  }
  return out;
}

/** The processes named `command` this process started. */
function childPids(command: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  return entries
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => {
      const s = procStat(pid);
      return s?.ppid === process.pid && s.comm === command;
    });
}

/**
 * Starts measuring; the returned function ends the phase and reports the
 * shares. `nodeCommand` is the chain node's process name; without one (a
 * ledger inside some other process) there are no shares.
 */
export function measureCpu(
  serverPid: number,
  nodeCommand: string | undefined,
): () => CpuShare | undefined {
  const nodes = nodeCommand ? childPids(nodeCommand) : [];
  const total = (pids: number[]) => pids.reduce((a, p) => a + (procStat(p)?.cpuSeconds ?? 0), 0);
  const startNode = total(nodes);
  const startServer = total([serverPid]);
  const startSelf = process.cpuUsage();
  const started = process.hrtime.bigint();
  return () => {
    if (nodes.length === 0) return undefined;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const self = process.cpuUsage(startSelf);
    return {
      node: (total(nodes) - startNode) / seconds,
      server: (total([serverPid]) - startServer) / seconds,
      loadGenerator: (self.user + self.system) / 1e6 / seconds,
    };
  };
}

/** The shares of several spans as one, each weighted by how long it lasted. */
export function combineCpuShares(
  spans: readonly { share: CpuShare | undefined; seconds: number }[],
): CpuShare | undefined {
  const measured = spans.filter((s): s is { share: CpuShare; seconds: number } => !!s.share);
  const seconds = measured.reduce((a, s) => a + s.seconds, 0);
  if (measured.length === 0 || seconds === 0) return undefined;
  const weighted = (pick: (c: CpuShare) => number) =>
    measured.reduce((a, s) => a + pick(s.share) * s.seconds, 0) / seconds;
  return {
    node: weighted((c) => c.node),
    server: weighted((c) => c.server),
    loadGenerator: weighted((c) => c.loadGenerator),
  };
}
