/**
 * Blocks read whole, against the local Starknet over its RPC: a lookup
 * finds a transaction's receipt in the block that holds it, says "not in
 * these blocks" only when every one of them was read, and declines (the
 * settle asks the node) when one was not.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Account, RpcProvider } from "starknet";
import { startStarknetLedger, type RunningStarknet } from "../../../devnet/starknet/index.js";
import { STARKNET_STRK } from "./networks.js";
import { BlockReceipts, READ_WHOLE_FROM } from "./blockReceipts.js";

describe("BlockReceipts", () => {
  let sn: RunningStarknet;
  let provider: RpcProvider;
  let reads: number[];
  let receipts: BlockReceipts;

  before(async () => {
    // Blocks are made by hand below, so each test knows what is in which.
    sn = await startStarknetLedger({ blockMs: 3_600_000 });
    provider = new RpcProvider({ nodeUrl: sn.info.rpcUrl });
  });
  after(async () => {
    await sn.stop();
  });

  const fresh = () => {
    reads = [];
    receipts = new BlockReceipts((n) => {
      reads.push(n);
      return provider.channel.getBlockWithReceipts(n);
    });
  };
  const pay = async (amount: number) => {
    // An executor holds STRK for the fee: it sends some STRK itself.
    const sender = new Account({
      provider,
      address: sn.executors[0]!.address,
      signer: sn.executors[0]!.privateKey,
      cairoVersion: "1",
    });
    const sent = await sender.execute(
      {
        contractAddress: STARKNET_STRK,
        entrypoint: "transfer",
        calldata: [sn.info.payTo, amount, 0],
      },
      { tip: 0n },
    );
    return sent.transaction_hash;
  };
  const head = () => sn.ledger.latest.number;

  test("finds a receipt in the block read whole, with the block's number and its status", async () => {
    fresh();
    const before = head();
    const hash = await pay(5);
    sn.ledger.produceBlock();
    await receipts.follow(before, head(), READ_WHOLE_FROM);
    assert.deepEqual(reads, [head()]);
    const found = receipts.find(hash, before, head());
    assert.ok(found, "the receipt is in the block read");
    assert.equal(found.block_number, head());
    assert.equal(found.finality_status, "ACCEPTED_ON_L2");
    assert.equal(found.execution_status, "SUCCEEDED");
    assert.ok((found.events ?? []).length > 0);
    // Padded or not, a hash is the same number.
    assert.ok(receipts.find(`0x000${hash.slice(2)}`, before, head()));
  });

  test("says 'not in these blocks' only when every block since was read", async () => {
    fresh();
    const before = head();
    sn.ledger.produceBlock();
    await receipts.follow(before, head(), READ_WHOLE_FROM);
    const hash = await pay(6);
    // Sent after the block read: not in it.
    assert.equal(receipts.find(hash, before, head()), null);
    // No block since `head()` was read: nothing is claimed.
    assert.equal(receipts.find(hash, before - 1, head()), undefined);
    sn.ledger.produceBlock();
    // Read nothing of the new block (too few waiting): the lookup declines.
    await receipts.follow(head() - 1, head(), READ_WHOLE_FROM - 1);
    assert.equal(reads.length, 1);
    assert.equal(receipts.find(hash, before, head()), undefined);
  });

  test("a block that cannot be read is not claimed, and a later head reads it", async () => {
    fresh();
    const before = head();
    const hash = await pay(7);
    sn.ledger.produceBlock();
    const failing = new BlockReceipts(() => Promise.reject(new Error("node down")));
    await failing.follow(before, head(), READ_WHOLE_FROM);
    assert.equal(failing.find(hash, before, head()), undefined);
    // Two blocks passed since `before`: both are read at the next head.
    sn.ledger.produceBlock();
    await receipts.follow(before, head(), READ_WHOLE_FROM);
    assert.deepEqual(reads, [head() - 1, head()]);
    assert.equal(receipts.find(hash, before, head())?.block_number, head() - 1);
  });

  test("a reorg: blocks a newer block no longer builds on are dropped, and lookups there decline", async () => {
    // Blocks as the node would serve them; block 11 is replaced after it was read.
    const served = new Map<number, unknown>();
    const block = (n: number, hash: string, parent: string, txs: string[]) =>
      served.set(n, {
        block_number: n,
        block_hash: hash,
        parent_hash: parent,
        status: "ACCEPTED_ON_L2",
        transactions: txs.map((t) => ({
          transaction: { transaction_hash: t },
          receipt: { transaction_hash: t, execution_status: "SUCCEEDED", events: [] },
        })),
      });
    const chain = new BlockReceipts(async (n) => served.get(n));
    block(10, "0xa10", "0xa09", []);
    block(11, "0xa11", "0xa10", ["0x77"]);
    await chain.follow(9, 11, READ_WHOLE_FROM);
    assert.equal(chain.find("0x77", 9, 11)?.block_number, 11);
    // Block 11 is taken back; the new 12 builds on another 11.
    block(11, "0xb11", "0xa10", []);
    block(12, "0xb12", "0xb11", []);
    await chain.follow(11, 12, READ_WHOLE_FROM);
    assert.equal(chain.find("0x77", 9, 12), undefined, "the old block 11 is not trusted");
    assert.equal(chain.find("0x77", 11, 12), null, "block 12 alone was read, and holds nothing");
  });
});
