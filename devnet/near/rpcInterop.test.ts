/**
 * The local NEAR chain answers what other clients send, not only what this
 * service sends: `@near-js/providers` (the chain's official client library)
 * including its positional calls (`query(path, data)`, `gasPrice`), and raw
 * JSON-RPC in both forms nearcore accepts for `block`, `gas_price`, `query`,
 * the sends and `tx`. Before, `block [height]` answered the head,
 * `gas_price` ignored its block, `query [path, data]` was refused, and the
 * `broadcast_tx_*` methods took no named parameters.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KeyPair } from "@near-js/crypto";
import { JsonRpcProvider } from "@near-js/providers";
import { KeyPairSigner } from "@near-js/signers";
import { actionCreators, createTransaction } from "@near-js/transactions";
import { baseDecode, baseEncode } from "@near-js/utils";
import { startNearLedger, type RunningNear } from "./index.js";

/** A view answer: what was asked for, at a block. */
type Viewed<T> = T & { block_height: number; block_hash: string };

async function post(url: string, method: string, params?: unknown) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: "dontcare", method, params }),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- RPC answers are read field by field
  return (await res.json()) as { result?: any; error?: any };
}

describe("the local NEAR chain and third-party clients", () => {
  let near: RunningNear;
  let provider: JsonRpcProvider;
  let relayer: { accountId: string; key: KeyPair };

  before(async () => {
    near = await startNearLedger({ blockMs: 100 });
    provider = new JsonRpcProvider({ url: near.info.rpcUrl });
    relayer = {
      accountId: near.info.relayers[0]!.accountId,
      key: KeyPair.fromString(near.info.relayers[0]!.secretKey as never),
    };
  });
  after(() => near.stop());

  const usdc = () => near.info.assets.USDC;
  const payer = () => near.info.payers[0]!;

  /** A 1-yocto NEAR transfer from the relayer, signed as near-api-js signs it. */
  async function transfer(nonceAhead = 1n) {
    const key = relayer.key.getPublicKey();
    const ak = await provider.viewAccessKey(relayer.accountId, key.toString());
    const block = await provider.viewBlock({ finality: "final" });
    const tx = createTransaction(
      relayer.accountId,
      key,
      near.info.payTo,
      BigInt(ak.nonce) + nonceAhead,
      [actionCreators.transfer(1n)],
      baseDecode(block.header.hash),
    );
    const [hash, signed] = await new KeyPairSigner(relayer.key).signTransaction(tx);
    return {
      signed,
      hash: baseEncode(hash),
      base64: Buffer.from(signed.encode()).toString("base64"),
    };
  }

  it("@near-js/providers: status, blocks, gas price, views, function calls, path queries, a send and its status", async () => {
    const status = await provider.viewNodeStatus();
    assert.equal(status.chain_id, "mainnet");
    const head = await provider.viewBlock({ finality: "optimistic" });
    const byHeight = await provider.viewBlock({ blockId: head.header.height });
    assert.equal(byHeight.header.hash, head.header.hash);
    assert.equal(
      (await provider.viewBlock({ blockId: head.header.hash })).header.height,
      head.header.height,
    );
    assert.ok(BigInt((await provider.viewGasPrice(undefined)).gas_price) > 0n);
    assert.ok(BigInt((await provider.viewAccount(payer().accountId)).amount) >= 0n);
    const keys = await provider.viewAccessKeyList(payer().accountId);
    assert.ok(keys.keys.length > 0);
    assert.equal(
      await provider.callFunction(usdc(), "ft_balance_of", { account_id: payer().accountId }),
      "10000000000",
    );
    // near-api-js's older query form: a path and base58 data, sent as an array.
    const viaPath = await provider.query<Viewed<{ amount: string }>>(
      `account/${payer().accountId}`,
      "",
    );
    assert.equal(viaPath.amount, String((await provider.viewAccount(payer().accountId)).amount));
    const call = await provider.query<Viewed<{ result: number[] }>>(
      `call/${usdc()}/ft_balance_of`,
      baseEncode(Buffer.from(JSON.stringify({ account_id: payer().accountId }))),
    );
    assert.equal(JSON.parse(Buffer.from(call.result).toString()), "10000000000");
    const pk = keys.keys[0]!.public_key;
    const viaKeyPath = await provider.query<Viewed<{ nonce: number }>>(
      `access_key/${payer().accountId}/${pk}`,
      "",
    );
    assert.equal(typeof viaKeyPath.nonce, "number");

    const { signed, hash } = await transfer();
    const outcome = await provider.sendTransaction(signed);
    assert.deepEqual(outcome.status, { SuccessValue: "" });
    const seen = await provider.viewTransactionStatus(
      hash,
      relayer.accountId,
      "EXECUTED_OPTIMISTIC",
    );
    assert.equal(seen.transaction_outcome.id, hash);
  });

  it("raw JSON-RPC: block, gas_price, query and tx answer alike by name and by position", async () => {
    const height = near.ledger.final.height;
    const pairs: [string, unknown, unknown][] = [
      ["block", { block_id: height }, [height]],
      ["block", { block_id: near.ledger.final.hash }, [near.ledger.final.hash]],
      ["gas_price", { block_id: null }, [null]],
      ["gas_price", { block_id: height }, [height]],
      ["status", {}, []],
    ];
    for (const [method, named, positional] of pairs) {
      const [a, b] = [
        await post(near.info.rpcUrl, method, named),
        await post(near.info.rpcUrl, method, positional),
      ];
      assert.equal(a.error, undefined, `${method}: ${JSON.stringify(a.error)}`);
      if (method === "status") assert.equal(b.result.chain_id, a.result.chain_id);
      else assert.deepEqual(b, a, `${method} ${JSON.stringify(positional)}`);
    }
    const named = await post(near.info.rpcUrl, "query", {
      request_type: "view_account",
      finality: "optimistic",
      account_id: payer().accountId,
    });
    const positional = await post(near.info.rpcUrl, "query", [`account/${payer().accountId}`, ""]);
    assert.equal(positional.result.amount, named.result.amount);

    const { hash, base64 } = await transfer();
    const sent = await post(near.info.rpcUrl, "broadcast_tx_commit", { signed_tx_base64: base64 });
    assert.deepEqual(sent.result?.status, { SuccessValue: "" }, JSON.stringify(sent.error));
    const byName = await post(near.info.rpcUrl, "tx", {
      tx_hash: hash,
      sender_account_id: relayer.accountId,
    });
    const byPosition = await post(near.info.rpcUrl, "tx", [hash, relayer.accountId]);
    assert.equal(byName.result.transaction_outcome.id, hash);
    assert.deepEqual(byPosition, byName);
    const withReceipts = await post(near.info.rpcUrl, "EXPERIMENTAL_tx_status", [
      hash,
      relayer.accountId,
    ]);
    assert.ok(Array.isArray(withReceipts.result.receipts));
  });

  it("raw JSON-RPC: the sends take the signed transaction by position or by name", async () => {
    const first = await transfer();
    const asArray = await post(near.info.rpcUrl, "broadcast_tx_async", [first.base64]);
    assert.equal(asArray.result, first.hash);
    const second = await transfer(2n);
    const asObject = await post(near.info.rpcUrl, "broadcast_tx_async", {
      signed_tx_base64: second.base64,
    });
    assert.equal(asObject.result, second.hash);
    const third = await transfer(3n);
    const sendTx = await post(near.info.rpcUrl, "send_tx", [third.base64]);
    assert.equal(sendTx.error, undefined, JSON.stringify(sendTx.error));
  });

  it("refuses what nearcore refuses: an unknown query path, a malformed positional call, an unknown method", async () => {
    const badPath = await post(near.info.rpcUrl, "query", ["nothing/here", ""]);
    assert.equal(badPath.error?.name, "REQUEST_VALIDATION_ERROR");
    const badTx = await post(near.info.rpcUrl, "tx", ["only-a-hash"]);
    assert.equal(badTx.error?.name, "REQUEST_VALIDATION_ERROR");
    const unknown = await post(near.info.rpcUrl, "no_such_method", []);
    assert.equal(unknown.error?.cause?.name, "METHOD_NOT_FOUND");
  });
});
