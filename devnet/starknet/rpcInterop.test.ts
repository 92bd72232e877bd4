/**
 * The local Starknet answers what other clients send, not only what this
 * service sends: starknet.js (the chain's official client library) as it
 * is, the same library with every call rewritten to positional parameters
 * (as clients that send arrays do), and raw JSON-RPC 2.0 with both
 * parameter styles for every method the node serves. The node refused
 * positional parameters ("this node takes named parameters") before.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Account, RpcProvider, hash } from "starknet";
import { STARKNET_STRK, STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import { startStarknetLedger, type RunningStarknet } from "./index.js";
import { PARAMETER_ORDER, starknetHandlers } from "./rpcServer.js";

type Call = { jsonrpc: "2.0"; id: number; method: string; params?: unknown };

/** A fetch that turns every named call starknet.js makes into the positional one. */
function positionalFetch(seen: Set<string>): typeof fetch {
  const toArray = (c: Call): Call => {
    const names = PARAMETER_ORDER[c.method];
    if (!names || Array.isArray(c.params)) return c;
    const named = (c.params ?? {}) as Record<string, unknown>;
    const given = names.filter((n) => named[n] !== undefined);
    const last = given.length ? names.indexOf(given[given.length - 1]!) : -1;
    seen.add(c.method);
    return { ...c, params: names.slice(0, last + 1).map((n) => named[n] ?? null) };
  };
  return (input, init) => {
    const body = JSON.parse(String(init?.body)) as Call | Call[];
    const rewritten = Array.isArray(body) ? body.map(toArray) : toArray(body);
    return fetch(input, { ...init, body: JSON.stringify(rewritten) });
  };
}

describe("the local Starknet and third-party clients", () => {
  let sn: RunningStarknet;
  let url: string;

  before(async () => {
    sn = await startStarknetLedger({ blockMs: 50 });
    url = sn.info.rpcUrl;
    // Payers hold no STRK (the facilitator pays their fees); here they send
    // transactions of their own, so they get some.
    for (const p of sn.info.payers) sn.ledger.mint(STARKNET_STRK, p.address, 10n ** 20n);
  });
  after(() => sn.stop());

  const rpc = async (method: string, params?: unknown) => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, ...(params ? { params } : {}) }),
    });
    return (await res.json()) as { result?: unknown; error?: { code: number; message: string } };
  };

  /** Reads, a transfer signed by an Account, and its receipt, through one provider. */
  async function payThrough(provider: RpcProvider, payer: number) {
    const pair = sn.info.payers[payer]!;
    const account = new Account({
      provider,
      address: pair.address,
      signer: pair.privateKey,
      cairoVersion: "1",
    });
    assert.equal(await provider.getChainId(), "0x534e5f4d41494e");
    assert.equal(await provider.getSpecVersion(), "0.10.0");
    assert.equal(typeof (await provider.getBlockNumber()), "number");
    assert.ok((await provider.getBlockWithTxHashes("latest")).timestamp > 0);
    assert.equal(typeof (await provider.getClassHashAt(pair.address)), "string");
    const nonce = BigInt(await provider.getNonceForAddress(pair.address));
    const balance = async () =>
      BigInt(
        (
          await provider.callContract({
            contractAddress: STARKNET_USDC,
            entrypoint: "balance_of",
            calldata: [pair.address],
          })
        )[0]!,
      );
    const before = await balance();
    const { transaction_hash } = await account.execute({
      contractAddress: STARKNET_USDC,
      entrypoint: "transfer",
      calldata: [sn.info.payTo, 1234, 0],
    });
    const receipt = await provider.waitForTransaction(transaction_hash, { retryInterval: 20 });
    assert.ok(receipt.isSuccess(), JSON.stringify(receipt.value));
    assert.equal(
      (await provider.getTransactionByHash(transaction_hash)).transaction_hash,
      transaction_hash,
    );
    assert.equal(await balance(), before - 1234n);
    assert.equal(BigInt(await provider.getNonceForAddress(pair.address)), nonce + 1n);
  }

  test("every method the node serves has its parameters' positional order", () => {
    const served = Object.keys(starknetHandlers(sn.ledger)).sort();
    assert.deepEqual(Object.keys(PARAMETER_ORDER).sort(), served);
  });

  test("starknet.js as it is (named parameters): reads, an Account's transfer, its receipt", async () => {
    await payThrough(new RpcProvider({ nodeUrl: url }), 0);
  });

  test("starknet.js with every call sent positionally: the same, estimates and the invoke included", async () => {
    const seen = new Set<string>();
    await payThrough(new RpcProvider({ nodeUrl: url, baseFetch: positionalFetch(seen) }), 1);
    for (const method of [
      "starknet_chainId",
      "starknet_getNonce",
      "starknet_call",
      "starknet_addInvokeTransaction",
      "starknet_getTransactionReceipt",
    ]) {
      assert.ok(seen.has(method), `${method} went positionally (${[...seen].join(", ")})`);
    }
  });

  test("raw JSON-RPC: each read method answers alike by name and by position", async () => {
    const payer = sn.info.payers[2]!.address;
    const latest = "latest";
    const call = {
      contract_address: STARKNET_USDC,
      entry_point_selector: hash.getSelectorFromName("balance_of"),
      calldata: [payer],
    };
    const cases: [string, Record<string, unknown>, unknown[]][] = [
      ["starknet_specVersion", {}, []],
      ["starknet_chainId", {}, []],
      ["starknet_syncing", {}, []],
      ["starknet_blockNumber", {}, []],
      ["starknet_blockHashAndNumber", {}, []],
      ["starknet_getBlockWithTxHashes", { block_id: { block_number: 0 } }, [{ block_number: 0 }]],
      ["starknet_getClassHashAt", { block_id: latest, contract_address: payer }, [latest, payer]],
      ["starknet_getNonce", { block_id: latest, contract_address: payer }, [latest, payer]],
      ["starknet_call", { request: call, block_id: latest }, [call, latest]],
    ];
    // A block is made every 50 ms: what names the newest block is compared by shape.
    const moving = new Set(["starknet_blockNumber", "starknet_blockHashAndNumber"]);
    for (const [method, named, positional] of cases) {
      const [a, b] = [await rpc(method, named), await rpc(method, positional)];
      assert.equal(a.error, undefined, `${method} by name: ${JSON.stringify(a.error)}`);
      if (moving.has(method)) {
        assert.equal(b.error, undefined, `${method} by position`);
        assert.equal(typeof b.result, typeof a.result);
      } else {
        assert.deepEqual(b, a, `${method} by position`);
      }
    }
    // The request a client written elsewhere sent, refused before.
    assert.deepEqual(await rpc("starknet_chainId", []), {
      jsonrpc: "2.0",
      id: 1,
      result: "0x534e5f4d41494e",
    });
  });

  test("raw JSON-RPC: the transaction methods by position; too many positions or a bad params type is -32602", async () => {
    const provider = new RpcProvider({ nodeUrl: url });
    const pair = sn.info.payers[3]!;
    const account = new Account({
      provider,
      address: pair.address,
      signer: pair.privateKey,
      cairoVersion: "1",
    });
    const { transaction_hash } = await account.execute({
      contractAddress: STARKNET_USDC,
      entrypoint: "transfer",
      calldata: [sn.info.payTo, 1, 0],
    });
    await provider.waitForTransaction(transaction_hash, { retryInterval: 20 });
    for (const method of [
      "starknet_getTransactionReceipt",
      "starknet_getTransactionStatus",
      "starknet_getTransactionByHash",
    ]) {
      const [a, b] = [
        await rpc(method, { transaction_hash }),
        await rpc(method, [transaction_hash]),
      ];
      assert.equal(a.error, undefined, method);
      assert.deepEqual(b, a, method);
    }
    const tooMany = await rpc("starknet_chainId", [1]);
    assert.equal(tooMany.error?.code, -32602);
    assert.match(tooMany.error!.message, /at most 0 parameters/);
    assert.equal((await rpc("starknet_getNonce", "latest")).error?.code, -32602);
    assert.equal((await rpc("starknet_nope", [])).error?.code, -32601);
  });
});
