/**
 * JSON-RPC batching is turned on only for RPC URLs that answer a batch: a
 * provider that refuses batches keeps working, one call per request.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { acceptsBatches, batchingUrls } from "../../src/chains/evm/rpc/rpcBatchProbe.js";
import { createEvmPublicClient } from "../../src/chains/evm/rpc/rpc.js";
import { findEvmNetwork } from "../../src/chains/evm/networks.js";
import { createLogger } from "../../src/lib/logger.js";
import { freePort } from "../support/processes.js";

/** Forwards single JSON-RPC calls to `target` and refuses batches, as some providers do. */
async function noBatchProxy(
  target: string,
): Promise<{ url: string; server: Server; seen: string[] }> {
  const seen: string[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    if (body.trimStart().startsWith("[")) {
      seen.push("batch");
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "batch requests are not supported" }));
      return;
    }
    seen.push("single");
    const upstream = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    res.writeHead(upstream.status, { "content-type": "application/json" });
    res.end(await upstream.text());
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${port}`, server, seen };
}

describe("RPC batching", () => {
  let devnet: Devnet;
  let anvilUrl: string;
  let proxy: Awaited<ReturnType<typeof noBatchProxy>>;
  before(async () => {
    devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null });
    anvilUrl = devnet.networks["eip155:8453"]!.rpcUrl;
    proxy = await noBatchProxy(anvilUrl);
  });
  after(async () => {
    proxy.server.close();
    await devnet.stop();
  });

  test("the probe: anvil accepts batches; a refusing provider and an unreachable URL do not", async () => {
    assert.equal(await acceptsBatches(anvilUrl), true);
    assert.equal(await acceptsBatches(proxy.url), false);
    assert.equal(await acceptsBatches(`http://127.0.0.1:${await freePort()}`), false);
    const set = await batchingUrls([anvilUrl, proxy.url], createLogger("silent"));
    assert.deepEqual([...set], [anvilUrl]);
  });

  test("calls to a URL that refuses batches go one by one and succeed", async () => {
    const network = findEvmNetwork("eip155:8453")!;
    const client = createEvmPublicClient(network, [proxy.url], 50, {
      batchSize: 100,
      urls: await batchingUrls([proxy.url], createLogger("silent")),
    });
    proxy.seen.length = 0;
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        client.getBalance({ address: `0x${(i + 1).toString(16).padStart(40, "0")}` }),
      ),
    );
    assert.equal(answers.length, 10);
    assert.ok(
      proxy.seen.length >= 10 && proxy.seen.every((s) => s === "single"),
      proxy.seen.join(),
    );
  });

  test("calls to a URL that accepts batches travel together", async () => {
    const network = findEvmNetwork("eip155:8453")!;
    // Count requests reaching anvil through a proxy that forwards batches too.
    let requests = 0;
    const server = createServer(async (req, res) => {
      requests++;
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const upstream = await fetch(anvilUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: Buffer.concat(chunks),
      });
      res.writeHead(upstream.status, { "content-type": "application/json" });
      res.end(await upstream.text());
    });
    const port = await freePort();
    await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${port}`;
      const client = createEvmPublicClient(network, [url], 50, {
        batchSize: 100,
        urls: new Set([url]),
      });
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          client.getBalance({ address: `0x${(i + 1).toString(16).padStart(40, "0")}` }),
        ),
      );
      assert.equal(answers.length, 20);
      assert.ok(requests <= 2, `20 calls took ${requests} HTTP requests`);
    } finally {
      server.close();
    }
  });
});
