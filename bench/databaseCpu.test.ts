/**
 * The database's CPU over a phase from two readings of its processes: a
 * process's own time since the first reading, a process started in between
 * counted whole, and one that ended counted up to its last reading.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpuSince, databaseThreadMs } from "./databaseCpu.js";
import type { ServerProfile } from "./serverProfile.js";

test("each process counts its time since the first reading; one started since counts whole", () => {
  const first = new Map([
    [10, 5.0],
    [11, 1.25],
  ]);
  const last = new Map([
    [10, 6.5],
    [11, 1.25],
    [12, 0.5],
  ]);
  assert.equal(cpuSince(first, last), 2.0);
});

test("a process read first and gone since (its last reading kept) counts up to that reading", () => {
  // The sampler keeps a process's last reading once it is gone; one never read again counts nothing.
  assert.equal(cpuSince(new Map([[10, 2]]), new Map([[10, 2]])), 0);
  assert.equal(cpuSince(new Map(), new Map()), 0);
});

test("the embedded database's thread is the service's first worker thread in the phase asked for", () => {
  const cpu = { totalMs: 0, busyMs: 0, byCategory: [], byPackage: [], byFunction: [] };
  const profile: ServerProfile = {
    ok: true,
    phases: [
      { label: "(a) verify", seconds: 30, cpu, threadBusyMs: [25_400, 2_300] },
      { label: "(b) settle", seconds: 10, cpu, threadBusyMs: [2_900, 2_000] },
    ],
    overall: cpu,
    stopped: "exited",
  };
  assert.equal(databaseThreadMs(profile, "(b) settle", true), 2_000);
  assert.equal(databaseThreadMs(profile, "(d) steady settle", true), undefined);
  assert.equal(databaseThreadMs(profile, "(b) settle", false), undefined);
  assert.equal(databaseThreadMs({ ok: false, why: "no profile" }, "(b) settle", true), undefined);
  const mainOnly = { ...profile, phases: [{ ...profile.phases[1]!, threadBusyMs: [2_900] }] };
  assert.equal(databaseThreadMs(mainOnly, "(b) settle", true), undefined);
});
