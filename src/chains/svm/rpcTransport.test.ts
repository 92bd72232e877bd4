/**
 * kit's Solana RPC client over `createSolanaRpcClient`, against a JSON-RPC
 * server on loopback: answers arrive as kit's own transport gives them
 * (integers as BigInt, beyond 2^53 too), an HTTP error keeps kit's error code
 * and status (the fee payers tell an outage by them), a dead port fails
 * with the connection's error, and connections are kept between calls.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR, isSolanaError, type Address } from "@solana/kit";
import { createSolanaRpcClient } from "./rpcTransport.js";

let server: Server;
let url: string;
let answer: (method: string, id: unknown) => { status: number; body: string };
const sockets = new Set<unknown>();
const bodies: string[] = [];

before(async () => {
  server = createServer((req, res) => {
    sockets.add(req.socket);
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (raw += c));
    req.on("end", () => {
      bodies.push(raw);
      const call = JSON.parse(raw) as { id: unknown; method: string };
      const { status, body } = answer(call.method, call.id);
      res.writeHead(status, { "content-type": "application/json" }).end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

const ADDRESS = "11111111111111111111111111111111" as Address;

test("an answer's integers arrive as BigInt, beyond 2^53 exactly", async () => {
  answer = (_m, id) => ({
    status: 200,
    // Written by hand: JSON.stringify cannot write an integer past 2^53.
    body: `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"context":{"slot":7},"value":18446744073709551615}}`,
  });
  const { value, context } = await createSolanaRpcClient(url).getBalance(ADDRESS).send();
  assert.equal(value, 18446744073709551615n);
  assert.equal(context.slot, 7n);
  const sent = JSON.parse(bodies.at(-1)!) as { method: string; params: unknown[] };
  assert.equal(sent.method, "getBalance");
  assert.deepEqual(sent.params, [ADDRESS, { commitment: "confirmed" }]);
});

test("an HTTP error is kit's transport error with its status", async () => {
  answer = () => ({ status: 503, body: "busy" });
  await assert.rejects(createSolanaRpcClient(url).getSlot().send(), (e: unknown) => {
    assert.ok(isSolanaError(e, SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR));
    assert.equal(e.context.statusCode, 503);
    return true;
  });
});

test("a JSON-RPC error is kit's error for it, not a transport failure", async () => {
  answer = (_m, id) => ({
    status: 200,
    body: JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32602, message: "bad params" } }),
  });
  await assert.rejects(createSolanaRpcClient(url).getSlot().send(), (e: unknown) => {
    assert.ok(isSolanaError(e));
    assert.ok(!isSolanaError(e, SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR));
    assert.match(String((e as Error).message), /bad params/);
    return true;
  });
});

test("a port nobody listens on fails with the connection's error", async () => {
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
  const port = (dead.address() as AddressInfo).port;
  await new Promise<void>((r) => dead.close(() => r()));
  await assert.rejects(
    createSolanaRpcClient(`http://127.0.0.1:${port}`).getSlot().send(),
    /ECONNREFUSED/,
  );
});

test("one client keeps its connections between calls", async () => {
  answer = (_m, id) => ({
    status: 200,
    body: JSON.stringify({ jsonrpc: "2.0", id, result: 1 }),
  });
  const rpc = createSolanaRpcClient(url);
  sockets.clear();
  for (let i = 0; i < 20; i++) await rpc.getSlot().send();
  // A connection is back in the pool a moment after its answer is read, so
  // the next call may open another one on a busy machine; a client per call
  // would open 20.
  assert.ok(sockets.size <= 5, `${sockets.size} connections for 20 calls`);
});
