/**
 * The local XRP Ledger answers what other clients send, not only what this
 * service sends: the `xrpl` package's `Client` (the chain's official client
 * library) over WebSocket, through its helpers (balances, autofill,
 * `submitAndWait`), and raw JSON-RPC over HTTP as rippled takes it: one
 * object inside `params`, or no params at all. rippled has no by-name or
 * by-position choice here; what it cannot read (params that are not one
 * object in an array) is refused rather than run without its parameters,
 * which is what this node did before.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, Wallet, xrpToDrops, type Payment } from "xrpl";
import { RLUSD_CURRENCY, RLUSD_ISSUER } from "../../src/chains/xrpl/networks.js";
import { startXrplLedger, type RunningXrpl } from "./index.js";

describe("the local XRP Ledger and third-party clients", () => {
  let xrpl: RunningXrpl;
  let client: Client;

  before(async () => {
    xrpl = await startXrplLedger({ closeMs: 200 });
    client = new Client(xrpl.info.wsUrl);
    await client.connect();
  });
  after(async () => {
    await client.disconnect();
    await xrpl.stop();
  });

  const payer = (i: number) => Wallet.fromSeed(xrpl.info.payerSeeds[i]!);
  const http = async (body: unknown) => {
    const res = await fetch(xrpl.info.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { result: Record<string, unknown> } };
  };

  test("xrpl's Client: server and fee reads, balances, an XRP and an RLUSD payment through submitAndWait", async () => {
    const info = await client.request({ command: "server_info" });
    assert.ok(info.result.info.validated_ledger);
    assert.ok((await client.getLedgerIndex()) > 0);
    const w = payer(0);
    assert.equal(await client.getXrpBalance(w.classicAddress), 10_000);
    const balances = await client.getBalances(w.classicAddress);
    assert.deepEqual(
      balances.find((b) => b.currency === RLUSD_CURRENCY),
      { currency: RLUSD_CURRENCY, issuer: RLUSD_ISSUER, value: "10000" },
    );
    const xrpPaid = await client.submitAndWait(
      {
        TransactionType: "Payment",
        Account: w.classicAddress,
        Destination: xrpl.info.payTo,
        Amount: xrpToDrops(1),
      } satisfies Payment,
      { wallet: w },
    );
    assert.equal(xrpPaid.result.validated, true);
    assert.equal(
      (xrpPaid.result.meta as { TransactionResult: string }).TransactionResult,
      "tesSUCCESS",
    );
    const rlusd = { currency: RLUSD_CURRENCY, issuer: RLUSD_ISSUER, value: "2.5" };
    const rlusdPaid = await client.submitAndWait(
      {
        TransactionType: "Payment",
        Account: w.classicAddress,
        Destination: xrpl.info.payTo,
        Amount: rlusd,
        SendMax: rlusd,
      } satisfies Payment,
      { wallet: w },
    );
    assert.equal(
      (rlusdPaid.result.meta as { TransactionResult: string }).TransactionResult,
      "tesSUCCESS",
    );
    const after = await client.getBalances(w.classicAddress);
    assert.equal(after.find((b) => b.currency === RLUSD_CURRENCY)?.value, "9997.5");
  });

  test("raw JSON-RPC: params as one object in an array, or none; the same answers as over WebSocket", async () => {
    const account = payer(1).classicAddress;
    for (const body of [
      { method: "server_info" },
      { method: "server_info", params: [{}] },
      { method: "server_info", params: null },
      { jsonrpc: "2.0", id: 7, method: "server_info", params: [{}] },
    ]) {
      const r = await http(body);
      assert.equal(r.status, 200, JSON.stringify(body));
      assert.equal(r.body.result["status"], "success", JSON.stringify(body));
    }
    const viaHttp = await http({
      method: "account_info",
      params: [{ account, ledger_index: "current" }],
    });
    const viaWs = await client.request({
      command: "account_info",
      account,
      ledger_index: "current",
    });
    const data = viaHttp.body.result["account_data"] as { Balance: string; Sequence: number };
    assert.equal(data.Balance, viaWs.result.account_data.Balance);
    assert.equal(data.Sequence, viaWs.result.account_data.Sequence);
    const lines = await http({ method: "account_lines", params: [{ account }] });
    assert.equal((lines.body.result["lines"] as unknown[]).length, 1);
    const fee = await http({ method: "fee", params: [{}] });
    assert.equal(fee.body.result["status"], "success");
  });

  test("raw JSON-RPC: params it cannot read are refused, never run without them", async () => {
    const account = payer(1).classicAddress;
    for (const params of [{ account }, [{ account }, { account }], ["account"], []]) {
      const r = await http({ method: "account_info", params });
      assert.equal(r.status, 400, JSON.stringify(params));
      assert.equal(r.body.result["error"], "invalidParams");
    }
    const unknown = await http({ method: "no_such_command", params: [{}] });
    assert.equal(unknown.body.result["error"], "unknownCmd");
  });
});
