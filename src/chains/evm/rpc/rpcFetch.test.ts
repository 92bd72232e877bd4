/**
 * viem's HTTP transport over `createRpcFetch`, against a JSON-RPC server on
 * loopback whose answers each test chooses: results and batches arrive as
 * with the global fetch, HTTP errors keep their status for viem's retry
 * rules, oversized answers are refused, and viem's timeout cancels the
 * request on the wire.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { BaseError, createPublicClient, http, type PublicClient } from "viem";
import { createRpcFetch } from "./rpcFetch.js";

type Handler = (body: unknown, req: IncomingMessage, res: ServerResponse) => void;

let server: Server;
let url: string;
let handler: Handler = () => {};
let requests = 0;
let closedEarly = 0;

before(async () => {
  server = createServer((req, res) => {
    requests++;
    res.on("close", () => {
      if (!res.writableEnded) closedEarly++;
    });
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (raw += c));
    req.on("end", () => handler(JSON.parse(raw), req, res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

function client(opts: { batch?: boolean; timeout?: number; maxBodyBytes?: number } = {}) {
  return createPublicClient({
    transport: http(url, {
      batch: opts.batch ? { batchSize: 100, wait: 0 } : false,
      retryCount: 0,
      timeout: opts.timeout ?? 5_000,
      // As transportFor sets it: the fetch enforces the limit itself.
      maxResponseBodySize: false,
      fetchFn: createRpcFetch(
        opts.maxBodyBytes === undefined ? {} : { maxBodyBytes: opts.maxBodyBytes },
      ),
    }),
  }) as PublicClient;
}

interface Call {
  id: number;
  method: string;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json" });
  res.end(text);
}

/** The error viem threw, with its whole chain of causes as one string. */
function describe(e: unknown): string {
  assert.ok(e instanceof BaseError, `expected a viem error, got ${String(e)}`);
  return `${e.name}: ${e.message}`;
}

/** The HTTP status viem recorded on the error or one of its causes. */
function statusOf(e: unknown): number | undefined {
  const found = (e as BaseError).walk(
    (c) => typeof (c as { status?: unknown }).status === "number",
  );
  return (found as { status?: number } | null)?.status;
}

test("one call and a batch of calls are answered, the batch in one HTTP request", async () => {
  handler = (body, _req, res) => {
    const answer = (c: Call) => ({ jsonrpc: "2.0", id: c.id, result: `0x${c.id.toString(16)}` });
    json(res, 200, Array.isArray(body) ? (body as Call[]).map(answer) : answer(body as Call));
  };
  requests = 0;
  const single = await client().request({ method: "eth_chainId" });
  assert.match(single, /^0x[0-9a-f]+$/);
  assert.equal(requests, 1);

  requests = 0;
  const batched = client({ batch: true });
  const answers = await Promise.all(
    Array.from({ length: 10 }, () => batched.request({ method: "eth_blockNumber" })),
  );
  assert.equal(requests, 1, "ten calls made together travel in one HTTP request");
  assert.equal(new Set(answers).size, 10, "each call gets the answer to its own id");
});

test("an HTTP error keeps its status and the JSON-RPC error it carried", async () => {
  handler = (body, _req, res) =>
    json(res, 429, {
      jsonrpc: "2.0",
      id: (body as Call).id,
      error: { code: -32005, message: "rate limited by the provider" },
    });
  await assert.rejects(client().request({ method: "eth_chainId" }), (e: unknown) => {
    assert.match(describe(e), /rate limited by the provider/);
    assert.equal(statusOf(e), 429);
    return true;
  });

  handler = (_body, _req, res) => {
    res.writeHead(502, { "content-type": "text/plain" });
    res.end("bad gateway");
  };
  await assert.rejects(client().request({ method: "eth_chainId" }), (e: unknown) => {
    assert.match(describe(e), /HTTP request failed/);
    assert.equal(statusOf(e), 502);
    return true;
  });

  // An empty body: the reason phrase is what tells an operator what happened.
  handler = (_body, _req, res) => {
    res.writeHead(503);
    res.end();
  };
  await assert.rejects(client().request({ method: "eth_chainId" }), (e: unknown) => {
    assert.match(describe(e), /Service Unavailable/);
    assert.equal(statusOf(e), 503);
    return true;
  });
});

test("an answer larger than the limit is refused, declared or streamed", async () => {
  const big = "0x" + "ab".repeat(4_000);
  handler = (body, _req, res) =>
    json(res, 200, { jsonrpc: "2.0", id: (body as Call).id, result: big });
  await assert.rejects(
    client({ maxBodyBytes: 1_000 }).request({ method: "eth_blockNumber" }),
    (e: unknown) => /larger than 1000 bytes/.test(describe(e)),
  );

  // No content-length: the limit is counted as the body arrives.
  handler = (body, _req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write(`{"jsonrpc":"2.0","id":${(body as Call).id},"result":"`);
    res.write(big);
    res.end(`"}`);
  };
  await assert.rejects(
    client({ maxBodyBytes: 1_000 }).request({ method: "eth_blockNumber" }),
    (e: unknown) => /larger than 1000 bytes/.test(describe(e)),
  );
  // Under the limit the same answer is read whole.
  const whole = await client({ maxBodyBytes: 100_000 }).request({ method: "eth_blockNumber" });
  assert.equal(whole, big);
});

test("viem's timeout cancels a request the server never answers", async () => {
  const stalled: ServerResponse[] = [];
  handler = (_body, _req, res) => void stalled.push(res);
  closedEarly = 0;
  await assert.rejects(client({ timeout: 200 }).request({ method: "eth_chainId" }), (e: unknown) =>
    /took too long/.test(describe(e)),
  );
  // The abort reached the socket: the server sees its request closed unanswered.
  for (let i = 0; i < 100 && closedEarly === 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(closedEarly, 1);
  for (const res of stalled) res.destroy();
});
