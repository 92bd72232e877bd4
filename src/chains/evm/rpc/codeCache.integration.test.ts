/**
 * Account code on a real chain (anvil): concurrent reads of one address in
 * one block share a single `eth_getCode`; code that exists is kept; "no
 * code" is read again in a later block (a wallet may have been deployed).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, createTestClient, http, type Hex, type PublicClient } from "viem";
import { startDevnet, type Devnet } from "../../../../devnet/evm/index.js";
import { CodeCache } from "./codeCache.js";

let devnet: Devnet;
let client: PublicClient;
let rpcUrl: string;
let getCodeCalls = 0;

before(async () => {
  devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null });
  rpcUrl = devnet.networks["eip155:8453"]!.rpcUrl;
  client = createPublicClient({
    // No cached block number: each read sees the block the chain is at.
    cacheTime: 0,
    transport: http(rpcUrl, {
      onFetchRequest: async (request) => {
        const body = (await request.clone().json()) as { method: string } | { method: string }[];
        for (const { method } of Array.isArray(body) ? body : [body]) {
          if (method === "eth_getCode") getCodeCalls++;
        }
      },
    }),
  }) as PublicClient;
});
after(() => devnet.stop());

test("twenty concurrent reads of one address in one block make one eth_getCode", async () => {
  const cache = new CodeCache(client);
  getCodeCalls = 0;
  const eoa = "0x5555555555555555555555555555555555555555" as Hex;
  const codes = await Promise.all(Array.from({ length: 20 }, () => cache.get(eoa)));
  assert.equal(getCodeCalls, 1);
  assert.ok(codes.every((c) => c === undefined || c === "0x"));
});

test("no code is read again after a block; code that exists is kept", async () => {
  const cache = new CodeCache(client);
  const wallet = "0x6666666666666666666666666666666666666666" as Hex;
  await cache.get(wallet);
  const testClient = createTestClient({ mode: "anvil", transport: http(rpcUrl) });
  await testClient.setCode({ address: wallet, bytecode: "0x60006000f3" });
  await testClient.mine({ blocks: 1 });
  getCodeCalls = 0;
  assert.equal(await cache.get(wallet), "0x60006000f3", "the deployed code is seen");
  assert.equal(getCodeCalls, 1);
  await testClient.mine({ blocks: 1 });
  assert.equal(await cache.get(wallet), "0x60006000f3");
  assert.equal(getCodeCalls, 1, "existing code is not read again");
});
