/**
 * Following validated XRPL ledgers by rippled's `ledger` stream, with
 * polling behind it: a wait for the next ledger is woken by the stream
 * itself (the polling interval here is an hour, so nothing else could wake
 * it); with the WebSocket down the waits poll and the index is read over
 * JSON-RPC; the stream comes back on its own. Then the whole service: a
 * payment settles once with the stream up, once with it down, and once
 * after it is back, each moving its amount and leaving one succeeded row.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, Wallet } from "xrpl";
import { XRPL_MAINNET, startXrplLedger, type RunningXrpl } from "../../../devnet/xrpl/index.js";
import { paymentFor } from "../../../src/chains/xrpl/clients/exactClient.js";
import { ValidatedLedgers } from "../../../src/chains/xrpl/validatedLedgers.js";
import { XrplRpc } from "../../../src/chains/xrpl/rpc.js";
import { startStack, type TestStack } from "../../support/stack.js";
import { paymentRequest } from "../../chains/evm/payments.js";
import { post } from "../../support/http.js";
import { xrpRequirements } from "./payments.js";
import { until } from "../../support/processes.js";

const HOUR_MS = 3_600_000;

describe("validated ledgers by stream, polling behind it", () => {
  let running: RunningXrpl;
  let ledgers: ValidatedLedgers;
  let pollMs = HOUR_MS;

  before(async () => {
    // No timed closes: the test closes each ledger itself.
    running = await startXrplLedger({ closeMs: HOUR_MS });
    const rpc = new XrplRpc({ network: XRPL_MAINNET, url: running.info.rpcUrl });
    ledgers = new ValidatedLedgers({
      network: XRPL_MAINNET,
      wsUrl: running.info.wsUrl,
      readValidated: () =>
        rpc
          .call<{ ledger_index: number }>("ledger", { ledger_index: "validated" })
          .then((r) => r.ledger_index),
      get pollMs() {
        return pollMs;
      },
    });
    await ledgers.start();
  });
  after(async () => {
    await ledgers?.close();
    await running?.stop();
  });

  test("the stream wakes a wait at the ledger's close, and the index comes from it", async () => {
    await until("the stream is subscribed", async () => ledgers.streaming);
    const seen = ledgers.known();
    assert.equal(seen, running.ledger.validatedIndex);
    const woken = ledgers.waitPast(seen, HOUR_MS);
    const closed = running.ledger.close();
    await woken;
    assert.equal(ledgers.known(), closed.index);
    assert.equal(await ledgers.current(), closed.index);
  });

  test("with the WebSocket down, waits poll and the index is read over JSON-RPC; the stream comes back", async () => {
    pollMs = 20;
    running.setWebSocketDown(true);
    await until("the stream is down", async () => !ledgers.streaming);
    assert.equal(ledgers.known(), undefined);
    const closed = running.ledger.close();
    await ledgers.waitPast(undefined, HOUR_MS);
    // Past the 250 ms a JSON-RPC read is shared for.
    assert.equal(
      await until("the index read over JSON-RPC", async () =>
        (await ledgers.current()) === closed.index ? closed.index : undefined,
      ),
      closed.index,
    );

    pollMs = HOUR_MS;
    running.setWebSocketDown(false);
    await until("the stream is back", async () => ledgers.streaming);
    const seen = ledgers.known();
    const woken = ledgers.waitPast(seen, HOUR_MS);
    const next = running.ledger.close();
    await woken;
    assert.equal(ledgers.known(), next.index);
  });
});

describe("settling on the XRP Ledger as the stream drops and returns", () => {
  let stack: TestStack;
  let ws: Client;

  before(async () => {
    stack = await startStack({ families: { xrpl: { closeMs: 200 } } });
    ws = new Client(stack.families.xrpl!.info.wsUrl);
    await ws.connect();
  });
  after(async () => {
    await ws?.disconnect();
    await stack.stop();
  });

  /** Payer `i`'s payment of `amount` drops, valid for 100 ledgers (20 s here). */
  const signed = async (i: number, amount: string) => {
    const req = xrpRequirements(stack, amount);
    const wallet = Wallet.fromSeed(stack.families.xrpl!.info.payerSeeds[i]!);
    const tx = await ws.autofill({
      ...paymentFor(wallet.classicAddress, req),
      LastLedgerSequence: (await ws.getLedgerIndex()) + 100,
    });
    return {
      payer: wallet.classicAddress,
      amount,
      body: paymentRequest(req, { signedTxBlob: wallet.sign(tx).tx_blob }),
    };
  };

  /** Settles one payment through the service; checks the ledger and the record. */
  const settleOnce = async (p: Awaited<ReturnType<typeof signed>>) => {
    const ledger = stack.families.xrpl!.ledger;
    const payTo = stack.families.xrpl!.info.payTo;
    const [payerBefore, payToBefore] = [ledger.xrpBalance(p.payer), ledger.xrpBalance(payTo)];
    const out = (await (await post(stack.url, "/settle", p.body, stack.apiKey)).json()) as {
      success: boolean;
      transaction: string;
    };
    assert.equal(out.success, true);
    const fee = BigInt(String(ledger.transaction(out.transaction)!.tx["Fee"]));
    assert.equal(ledger.xrpBalance(p.payer), payerBefore - BigInt(p.amount) - fee);
    assert.equal(ledger.xrpBalance(payTo), payToBefore + BigInt(p.amount));
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "transaction"])
      .where("payer", "=", p.payer)
      .where("amount", "=", p.amount)
      .execute();
    assert.deepEqual(
      rows.map((r) => [r.status, r.transaction]),
      [["succeeded", out.transaction]],
    );
  };

  test("a payment settles with the stream up, down, and back", async () => {
    const xrpl = stack.families.xrpl!;
    // Signed first: the WebSocket this test signs through goes down too.
    const payments = [await signed(0, "4101"), await signed(1, "4102"), await signed(2, "4103")];
    await ws.disconnect();
    await until("the service follows the ledger stream", async () => xrpl.ledgerSubscribers() > 0);
    await settleOnce(payments[0]!);

    xrpl.setWebSocketDown(true);
    try {
      assert.equal(xrpl.ledgerSubscribers(), 0);
      await settleOnce(payments[1]!);
    } finally {
      xrpl.setWebSocketDown(false);
    }

    await until("the service follows the stream again", async () => xrpl.ledgerSubscribers() > 0);
    await settleOnce(payments[2]!);
  });
});

describe("settles woken by one ledger close", () => {
  const PAYERS = 8;
  let stack: TestStack;
  let ws: Client;

  before(async () => {
    // Closed by hand, so every payment is submitted before its ledger closes.
    stack = await startStack({ families: { xrpl: { closeMs: HOUR_MS, payers: PAYERS } } });
    ws = new Client(stack.families.xrpl!.info.wsUrl);
    await ws.connect();
  });
  after(async () => {
    await ws?.disconnect();
    await stack.stop();
  });

  test("share one read of that ledger, ask `tx` nothing, and each settles once", async () => {
    const xrpl = stack.families.xrpl!;
    const payTo = xrpl.info.payTo;
    const payments = await Promise.all(
      Array.from({ length: PAYERS }, async (_, i) => {
        const req = xrpRequirements(stack, String(6100 + i));
        const wallet = Wallet.fromSeed(xrpl.info.payerSeeds[i]!);
        const tx = await ws.autofill({
          ...paymentFor(wallet.classicAddress, req),
          LastLedgerSequence: (await ws.getLedgerIndex()) + 100,
        });
        return paymentRequest(req, { signedTxBlob: wallet.sign(tx).tx_blob });
      }),
    );
    await until("the service follows the ledger stream", async () => xrpl.ledgerSubscribers() > 0);
    const payToBefore = xrpl.ledger.xrpBalance(payTo);
    const [txBefore, ledgerBefore, submitBefore] = ["tx", "ledger", "submit"].map((m) =>
      xrpl.callsServed(m),
    );
    const answers = payments.map(async (body) => {
      const res = await post(stack.url, "/settle", body, stack.apiKey);
      return (await res.json()) as { success: boolean; transaction: string };
    });
    await until(
      "every payment is submitted",
      async () => xrpl.callsServed("submit") - submitBefore! === PAYERS,
    );
    xrpl.ledger.close();
    const outs = await Promise.all(answers);

    assert.deepEqual(
      outs.map((o) => o.success),
      Array<boolean>(PAYERS).fill(true),
    );
    // Applied at submission, they could only land in the ledger closed after:
    // no `tx` before it, and one read of it for all of them after.
    assert.equal(xrpl.callsServed("tx") - txBefore!, 0);
    assert.equal(xrpl.callsServed("ledger") - ledgerBefore!, 1);
    const sum = Array.from({ length: PAYERS }, (_, i) => 6100n + BigInt(i)).reduce((a, b) => a + b);
    assert.equal(xrpl.ledger.xrpBalance(payTo), payToBefore + sum);
    const rows = await stack.service.db
      .selectFrom("settlements")
      .select(["status", "transaction"])
      .where(
        "transaction",
        "in",
        outs.map((o) => o.transaction),
      )
      .execute();
    assert.equal(rows.length, PAYERS);
    assert.ok(rows.every((r) => r.status === "succeeded"));
  });
});
