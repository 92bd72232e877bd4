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
          bodies: signRun,
        },
      ],
      { seconds: 0.6, rounds: 3, warmupSeconds: 0.1, concurrency: 4, progress: () => undefined },
    );
    // Runs in turns: a warm-up each, then A B A B A B. A run ends only when
    // its last answer is in (late ones are not counted), and the server logs
    // a request before answering it, so the log holds each run as one block.
    const runs = log.map((l) => l.server).filter((s, i, all) => i === 0 || all[i - 1] !== s);
    assert.deepEqual(runs, ["A", "B", "A", "B", "A", "B", "A", "B"]);
    assert.equal(signed, 4, "B signed once per run, warm-up included");
    for (const name of ["A", "B"]) {
      const bodies = log.filter((l) => l.server === name).map((l) => l.body);
      assert.equal(new Set(bodies).size, bodies.length, `${name} never got a payload twice`);
    }
    // A's runs went on through its one list, each from where the last one
    // stopped: what it was sent is the list's first payloads, every one once.
    const aBodies = log.filter((l) => l.server === "A").map((l) => l.body);
    assert.deepEqual(new Set(aBodies), new Set(shared.slice(0, aBodies.length)));
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
