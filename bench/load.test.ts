import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mergeLoadResults, runLoad } from "./load.js";

test("a timed run counts only the answers that came within its time, and lasts that time", async () => {
  // The first request of each worker is answered at once; every later one is
  // held until the test lets go, well past the run's end.
  let seen = 0;
  const held: ServerResponse[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen++;
      if (seen <= 2) res.end(JSON.stringify({ isValid: true }));
      else held.push(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  const released = setTimeout(() => held.forEach((r) => r.end("{}")), 1_000);
  try {
    const result = await runLoad({
      url: `http://127.0.0.1:${port}/verify`,
      headers: {},
      concurrency: 2,
      body: () => "{}",
      durationMs: 300,
      classify: (status, json) => ((json as { isValid?: boolean }).isValid ? "valid" : "other"),
    });
    // The two held answers came after the 300 ms: a run that waited for
    // them would count 4 and last about a second.
    assert.equal(result.count, 2);
    assert.deepEqual([...result.outcomes], [["valid", 2]]);
    assert.equal(result.seconds, 0.3);
    assert.equal(result.sent, 4);
    assert.equal(seen, 4);
  } finally {
    clearTimeout(released);
    held.forEach((r) => r.end("{}"));
    await new Promise((r) => server.close(r));
  }
});

test("merged runs add their counts, times and outcomes and pool their latencies in order", () => {
  const merged = mergeLoadResults([
    { count: 2, seconds: 10, sent: 3, latenciesMs: [5, 30], outcomes: new Map([["valid", 2]]) },
    {
      count: 3,
      seconds: 10,
      sent: 3,
      latenciesMs: [1, 10, 40],
      outcomes: new Map([
        ["valid", 2],
        ["http_503", 1],
      ]),
    },
  ]);
  assert.equal(merged.count, 5);
  assert.equal(merged.seconds, 20);
  assert.equal(merged.sent, 6);
  assert.deepEqual(merged.latenciesMs, [1, 5, 10, 30, 40]);
  assert.deepEqual(
    [...merged.outcomes],
    [
      ["valid", 4],
      ["http_503", 1],
    ],
  );
});
