import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { verifyInTurns } from "./verifyInTurns.js";

/** A /verify stand-in that answers valid and notes which server saw which body, in order. */
async function fakeVerifier(
  name: string,
  log: { server: string; body: string }[],
): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      log.push({ server: name, body });
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ isValid: true }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

test("verify runs alternate between the servers, and no server is sent a payload twice", async () => {
  const log: { server: string; body: string }[] = [];
  const a = await fakeVerifier("A", log);
  const b = await fakeVerifier("B", log);
  // A shares one long list across its runs; B signs a fresh list per run.
  const shared = Array.from({ length: 100_000 }, (_, i) => `a${i}`);
  let signed = 0;
  const signRun = async () => {
    const run = signed++;
    return Array.from({ length: 100_000 }, (_, i) => `b${run}-${i}`);
  };
  try {
    const verified = await verifyInTurns(
      [
        { name: "A", url: a.url, pid: process.pid, countsDb: false, headers: {}, bodies: shared },
        {
          name: "B",
          url: b.url,
          pid: process.pid,
          countsDb: false,
          headers: {},
          bodies: [],
          signRun,
        },
      ],
      { seconds: 0.6, rounds: 3, warmupSeconds: 0.1, concurrency: 4, progress: () => undefined },
    );
    // Runs in turns: a warm-up each, then A B A B A B. B's payloads name
    // their run, so the first of each B run marks where it began; A ran
    // before each of them. (An answer still in flight when a run ends may
    // reach its server after the next run began, so the log is not cut in
    // clean blocks.)
    const firstOfB = [0, 1, 2, 3].map((run) => log.findIndex((l) => l.body.startsWith(`b${run}-`)));
    assert.ok(firstOfB.every((at, k) => at >= 0 && (k === 0 || at > firstOfB[k - 1]!)));
    const aBetween = firstOfB.map(
      (at, k) =>
        log.slice(k === 0 ? 0 : firstOfB[k - 1], at).filter((l) => l.server === "A").length,
    );
    assert.ok(
      aBetween.every((n) => n > 0),
      `A's runs come before each of B's (${aBetween.join(", ")} requests)`,
    );
    assert.equal(signed, 4, "B signed once per run, warm-up included");
    for (const name of ["A", "B"]) {
      const bodies = log.filter((l) => l.server === name).map((l) => l.body);
      assert.equal(new Set(bodies).size, bodies.length, `${name} never got a payload twice`);
    }
    // A's runs went on through its one list; its warm-up's payloads count as used.
    const aBodies = log.filter((l) => l.server === "A").map((l) => l.body);
    assert.deepEqual(aBodies.slice(0, 3), ["a0", "a1", "a2"].slice(0, Math.min(3, aBodies.length)));
    assert.equal(verified[0]!.payloadsUsed, aBodies.length);
    // Only the measured rounds count: the warm-ups' answers are left out.
    const measured = verified.map((v) => v.verify.outcomes.get("valid") ?? 0);
    for (const [i, name] of ["A", "B"].entries())
      assert.ok(measured[i]! < log.filter((l) => l.server === name).length);
  } finally {
    for (const s of [a.server, b.server]) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  }
});
