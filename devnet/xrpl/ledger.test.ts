/**
 * The local XRP Ledger refuses what rippled refuses and moves exactly what
 * rippled moves. Driven through the `xrpl` package's own `Client` over
 * WebSocket (signing, autofill, `submit`, `tx`) and through JSON-RPC over
 * HTTP, with ledgers closed by hand so every step is deterministic.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  Client,
  Wallet,
  decode,
  encode,
  getBalanceChanges,
  type Payment,
  type TransactionMetadata,
} from "xrpl";
import { RLUSD_CURRENCY, RLUSD_ISSUER } from "../../src/chains/xrpl/networks.js";
import { devnetXrplWallet, startXrplLedger, type RunningXrpl } from "./index.js";

describe("local XRP Ledger", () => {
  let xrpl: RunningXrpl;
  let client: Client;
  const payer = (i: number) => Wallet.fromSeed(xrpl.info.payerSeeds[i]!);
  const rlusd = (value: string) => ({ currency: RLUSD_CURRENCY, issuer: RLUSD_ISSUER, value });

  before(async () => {
    // A close interval long enough that only `close()` closes ledgers here.
    xrpl = await startXrplLedger({ closeMs: 3_600_000 });
    client = new Client(xrpl.info.wsUrl);
    await client.connect();
  });
  after(async () => {
    await client.disconnect();
    await xrpl.stop();
  });

  const signed = async (wallet: Wallet, fields: Partial<Payment>) => {
    const tx = await client.autofill({
      TransactionType: "Payment",
      Account: wallet.classicAddress,
      Destination: xrpl.info.payTo,
      Amount: "1000",
      ...fields,
    } as Payment);
    return wallet.sign(tx);
  };
  const submit = async (blob: string) =>
    (await client.request({ command: "submit", tx_blob: blob })).result.engine_result;

  test("an XRP payment: tesSUCCESS once validated, the fee burned, metadata that getBalanceChanges reads", async () => {
    const w = payer(0);
    const before = xrpl.ledger.xrpBalance(w.classicAddress);
    const payToBefore = xrpl.ledger.xrpBalance(xrpl.info.payTo);
    const { tx_blob, hash } = await signed(w, { Amount: "250000" });
    assert.equal(await submit(tx_blob), "tesSUCCESS");
    const pending = await client.request({ command: "tx", transaction: hash });
    assert.equal(pending.result.validated, false);
    xrpl.ledger.close();
    const done = await client.request({ command: "tx", transaction: hash });
    assert.equal(done.result.validated, true);
    const meta = done.result.meta as TransactionMetadata;
    assert.equal(meta.TransactionResult, "tesSUCCESS");
    const fee = BigInt(String(done.result.tx_json.Fee));
    assert.equal(xrpl.ledger.xrpBalance(w.classicAddress), before - 250000n - fee);
    assert.equal(xrpl.ledger.xrpBalance(xrpl.info.payTo), payToBefore + 250000n);
    const changes = getBalanceChanges(meta);
    const of = (a: string) => changes.find((c) => c.account === a)?.balances[0]?.value;
    assert.equal(of(xrpl.info.payTo), "0.25");
    assert.equal(of(w.classicAddress), String(-(250000 + Number(fee)) / 1e6));
  });

  test("an RLUSD payment moves trust-line balances; getBalanceChanges sees both sides", async () => {
    const w = payer(1);
    const before = xrpl.ledger.issuedBalance(w.classicAddress, RLUSD_ISSUER, RLUSD_CURRENCY);
    const { tx_blob, hash } = await signed(w, { Amount: rlusd("1.25") });
    assert.equal(await submit(tx_blob), "tesSUCCESS");
    xrpl.ledger.close();
    assert.equal(
      xrpl.ledger.issuedBalance(w.classicAddress, RLUSD_ISSUER, RLUSD_CURRENCY),
      String(Number(before) - 1.25),
    );
    assert.equal(xrpl.ledger.issuedBalance(xrpl.info.payTo, RLUSD_ISSUER, RLUSD_CURRENCY), "1.25");
    const done = await client.request({ command: "tx", transaction: hash });
    const changes = getBalanceChanges(done.result.meta as TransactionMetadata);
    const payTo = changes.find((c) => c.account === xrpl.info.payTo)!;
    assert.deepEqual(payTo.balances, [
      { currency: RLUSD_CURRENCY, issuer: RLUSD_ISSUER, value: "1.25" },
    ]);
  });

  test("the same transaction twice: tefPAST_SEQ, nothing moves again", async () => {
    const w = payer(2);
    const { tx_blob } = await signed(w, {});
    assert.equal(await submit(tx_blob), "tesSUCCESS");
    const after = xrpl.ledger.xrpBalance(w.classicAddress);
    assert.equal(await submit(tx_blob), "tefPAST_SEQ");
    xrpl.ledger.close();
    assert.equal(xrpl.ledger.xrpBalance(w.classicAddress), after);
  });

  test("a sequence ahead of the account: terPRE_SEQ; behind: tefPAST_SEQ", async () => {
    const w = payer(3);
    const seq = xrpl.ledger.account(w.classicAddress)!.Sequence;
    assert.equal(await submit((await signed(w, { Sequence: seq + 5 })).tx_blob), "terPRE_SEQ");
    assert.equal(await submit((await signed(w, { Sequence: seq - 1 })).tx_blob), "tefPAST_SEQ");
    assert.equal(xrpl.ledger.account(w.classicAddress)!.Sequence, seq);
  });

  test("a forged signature: temBAD_SIGNATURE; another account's key: tefBAD_AUTH; a disabled master key: tefMASTER_DISABLED", async () => {
    const w = payer(4);
    const { tx_blob } = await signed(w, {});
    // The signed payment with a larger amount: its signature no longer covers it.
    const forged = encode({ ...decode(tx_blob), Amount: "999999" } as Payment);
    assert.equal(await submit(forged), "temBAD_SIGNATURE");

    const stranger = devnetXrplWallet("stranger");
    const tx = await client.autofill({
      TransactionType: "Payment",
      Account: w.classicAddress,
      Destination: xrpl.info.payTo,
      Amount: "1000",
    });
    assert.equal(await submit(stranger.sign(tx).tx_blob), "tefBAD_AUTH");

    xrpl.ledger.setAccountFlags(w.classicAddress, 0x00100000, stranger.classicAddress);
    try {
      assert.equal(await submit(w.sign(tx).tx_blob), "tefMASTER_DISABLED");
      // The regular key may sign for it.
      assert.equal(await submit(stranger.sign(tx).tx_blob), "tesSUCCESS");
    } finally {
      xrpl.ledger.setAccountFlags(w.classicAddress, 0);
    }
  });

  test("LastLedgerSequence passed: tefMAX_LEDGER", async () => {
    const w = payer(0);
    const { tx_blob } = await signed(w, { LastLedgerSequence: xrpl.ledger.validatedIndex });
    assert.equal(await submit(tx_blob), "tefMAX_LEDGER");
  });

  test("more XRP than the balance above the reserve: tecUNFUNDED_PAYMENT; only the fee is claimed", async () => {
    const w = payer(2);
    const balance = xrpl.ledger.xrpBalance(w.classicAddress);
    const { tx_blob, hash } = await signed(w, { Amount: balance.toString() });
    assert.equal(await submit(tx_blob), "tecUNFUNDED_PAYMENT");
    xrpl.ledger.close();
    const done = await client.request({ command: "tx", transaction: hash });
    assert.equal(
      (done.result.meta as TransactionMetadata).TransactionResult,
      "tecUNFUNDED_PAYMENT",
    );
    assert.equal(
      xrpl.ledger.xrpBalance(w.classicAddress),
      balance - BigInt(String(done.result.tx_json.Fee)),
    );
  });

  test("fail_hard: a payment that would only claim a fee is not applied at all", async () => {
    const w = payer(2);
    const balance = xrpl.ledger.xrpBalance(w.classicAddress);
    const seq = xrpl.ledger.account(w.classicAddress)!.Sequence;
    const { tx_blob } = await signed(w, { Amount: balance.toString() });
    const r = await client.request({ command: "submit", tx_blob, fail_hard: true });
    assert.equal(r.result.engine_result, "tecUNFUNDED_PAYMENT");
    assert.equal(r.result.applied, false);
    assert.equal(xrpl.ledger.xrpBalance(w.classicAddress), balance);
    assert.equal(xrpl.ledger.account(w.classicAddress)!.Sequence, seq);
  });

  test("no trust line at the destination: tecPATH_DRY; an unfunded destination: tecNO_DST or tecNO_DST_INSUF_XRP", async () => {
    const w = payer(1);
    const lineless = devnetXrplWallet("lineless");
    xrpl.ledger.fund(lineless.classicAddress, 50_000_000n);
    assert.equal(
      await submit(
        (await signed(w, { Destination: lineless.classicAddress, Amount: rlusd("1") })).tx_blob,
      ),
      "tecPATH_DRY",
    );
    const nobody = devnetXrplWallet("nobody").classicAddress;
    assert.equal(
      await submit((await signed(w, { Destination: nobody, Amount: rlusd("1") })).tx_blob),
      "tecNO_DST",
    );
    assert.equal(
      await submit((await signed(w, { Destination: nobody, Amount: "1000" })).tx_blob),
      "tecNO_DST_INSUF_XRP",
    );
    assert.equal(xrpl.ledger.account(nobody), undefined);
  });

  test("more RLUSD than held: tecPATH_PARTIAL; a NetworkID on mainnet: refused", async () => {
    const w = payer(3);
    const held = xrpl.ledger.issuedBalance(w.classicAddress, RLUSD_ISSUER, RLUSD_CURRENCY);
    assert.equal(
      await submit((await signed(w, { Amount: rlusd(String(Number(held) + 1)) })).tx_blob),
      "tecPATH_PARTIAL",
    );
    assert.equal(
      await submit((await signed(w, { NetworkID: 0 })).tx_blob),
      "telNETWORK_ID_MAKES_TX_NON_CANONICAL",
    );
  });

  test("simulate answers the engine result without changing anything; JSON-RPC over HTTP serves the same", async () => {
    const w = payer(0);
    const before = xrpl.ledger.xrpBalance(w.classicAddress);
    const tx = await client.autofill({
      TransactionType: "Payment",
      Account: w.classicAddress,
      Destination: xrpl.info.payTo,
      Amount: "5000",
    });
    const sim = await client.simulate(tx);
    assert.equal(sim.result.engine_result, "tesSUCCESS");
    assert.equal(xrpl.ledger.xrpBalance(w.classicAddress), before);
    const res = await fetch(xrpl.info.rpcUrl, {
      method: "POST",
      body: JSON.stringify({ method: "account_info", params: [{ account: w.classicAddress }] }),
    });
    const body = (await res.json()) as {
      result: { status: string; account_data: { Balance: string } };
    };
    assert.equal(body.result.status, "success");
    assert.equal(body.result.account_data.Balance, before.toString());
    const missing = await fetch(xrpl.info.rpcUrl, {
      method: "POST",
      body: JSON.stringify({
        method: "account_info",
        params: [{ account: devnetXrplWallet("ghost").classicAddress }],
      }),
    });
    assert.equal(
      ((await missing.json()) as { result: { error: string } }).result.error,
      "actNotFound",
    );
  });

  test("a held transaction that misses its LastLedgerSequence is dropped and never applied", async () => {
    const w = payer(4);
    const before = xrpl.ledger.xrpBalance(w.classicAddress);
    const { tx_blob, hash } = await signed(w, {
      LastLedgerSequence: xrpl.ledger.validatedIndex + 2,
    });
    xrpl.ledger.withhold = true;
    try {
      assert.equal(await submit(tx_blob), "terQUEUED");
      xrpl.ledger.close();
      xrpl.ledger.close();
      xrpl.ledger.close();
    } finally {
      xrpl.ledger.release();
    }
    await assert.rejects(
      client.request({ command: "tx", transaction: hash }),
      /txnNotFound|not found/i,
    );
    assert.equal(xrpl.ledger.xrpBalance(w.classicAddress), before);
    // Asked over a range, the ledger says whether it searched all of it, as rippled does.
    const lookup = async (min: number, max: number) => {
      const res = await fetch(xrpl.info.rpcUrl, {
        method: "POST",
        body: JSON.stringify({
          method: "tx",
          params: [{ transaction: hash, min_ledger: min, max_ledger: max }],
        }),
      });
      return ((await res.json()) as { result: { error: string; searched_all?: boolean } }).result;
    };
    const v = xrpl.ledger.validatedIndex;
    const within = await lookup(v - 3, v);
    assert.deepEqual([within.error, within.searched_all], ["txnNotFound", true]);
    assert.equal((await lookup(v - 3, v + 5)).searched_all, false, "a ledger not validated yet");
  });
});
