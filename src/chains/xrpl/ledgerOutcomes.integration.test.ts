/**
 * One read of a validated ledger answers every lookup of it made in one
 * turn, a lone lookup goes to `tx`, and a ledger that cannot be read sends
 * every asker to `tx` too. Against the local XRP Ledger over JSON-RPC, its
 * ledgers closed by hand.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, Wallet, type Payment } from "xrpl";
import { startXrplLedger, XRPL_MAINNET, type RunningXrpl } from "../../../devnet/xrpl/index.js";
import { LedgerOutcomes } from "./ledgerOutcomes.js";
import { XrplRpc } from "./rpc.js";

describe("a validated ledger's outcomes, read once", () => {
  let xrpl: RunningXrpl;
  let client: Client;
  let rpc: XrplRpc;

  before(async () => {
    xrpl = await startXrplLedger({ closeMs: 3_600_000, payers: 5 });
    client = new Client(xrpl.info.wsUrl);
    await client.connect();
    rpc = new XrplRpc({ network: XRPL_MAINNET, url: xrpl.info.rpcUrl });
  });
  after(async () => {
    await client?.disconnect();
    await xrpl?.stop();
  });

  /** Payer `i` pays `amount` drops; submitted, not yet validated. */
  const pay = async (i: number, amount: string) => {
    const wallet = Wallet.fromSeed(xrpl.info.payerSeeds[i]!);
    const tx = await client.autofill({
      TransactionType: "Payment",
      Account: wallet.classicAddress,
      Destination: xrpl.info.payTo,
      Amount: amount,
    } as Payment);
    const { tx_blob, hash } = wallet.sign(tx);
    const r = await client.request({ command: "submit", tx_blob });
    assert.equal(r.result.engine_result, "tesSUCCESS");
    return hash;
  };

  test("four lookups of one ledger in a turn: one read answers each, and a payment not in it is null", async () => {
    const hashes = await Promise.all([0, 1, 2, 3].map((i) => pay(i, String(1000 + i))));
    const closed = xrpl.ledger.close();
    const elsewhere = await pay(4, "2000"); // in the next ledger, not this one
    const outcomes = new LedgerOutcomes(rpc);
    const readsBefore = xrpl.callsServed("ledger");
    const answers = await Promise.all(
      [...hashes, elsewhere].map((h) => outcomes.outcome(closed.index, h.toLowerCase())),
    );
    assert.deepEqual(answers, ["tesSUCCESS", "tesSUCCESS", "tesSUCCESS", "tesSUCCESS", null]);
    assert.equal(xrpl.callsServed("ledger") - readsBefore, 1);

    // A later lookup of a ledger already read is answered from it.
    assert.equal(await outcomes.outcome(closed.index, hashes[0]!), "tesSUCCESS");
    assert.equal(xrpl.callsServed("ledger") - readsBefore, 1);
    xrpl.ledger.close();
  });

  test("a lone lookup of a ledger not read is left to `tx`", async () => {
    const hash = await pay(0, "3000");
    const closed = xrpl.ledger.close();
    const outcomes = new LedgerOutcomes(rpc);
    const readsBefore = xrpl.callsServed("ledger");
    assert.equal(await outcomes.outcome(closed.index, hash), undefined);
    assert.equal(xrpl.callsServed("ledger"), readsBefore);
  });

  test("a ledger that cannot be read sends every asker to `tx`", async () => {
    const outcomes = new LedgerOutcomes(rpc);
    const beyond = xrpl.ledger.validatedIndex + 50; // not closed: the node has no such ledger
    const answers = await Promise.all(
      ["A", "B", "C", "D"].map((h) => outcomes.outcome(beyond, h.repeat(64))),
    );
    assert.deepEqual(answers, [undefined, undefined, undefined, undefined]);
  });
});
