/**
 * The node accepts a settlement transaction but its answer never reaches the
 * service (the connection drops). The payment must never be reported as
 * failed while it can still land, and must never be sent twice:
 * - answer lost once: the same bytes are re-sent, the node says it already
 *   has them, and the settlement succeeds;
 * - answer lost every time: `settlement_pending` with the hash, the row stays
 *   pending, and the reconciler records the success from the chain.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Hex } from "viem";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { startEvmService, type EvmService } from "../support/evmService.js";
import type { Service } from "../../src/app.js";
import { until } from "../support/processes.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";

const PAY_TO = "0xabababababababababababababababababababab" as Hex;

describe("a broadcast whose answer is lost", () => {
  let devnet: Devnet;
  let proxy: RpcProxy;
  let fixture: EvmService;
  let service: Service;
  let url: string;
  let apiKey: string;

  before(async () => {
    devnet = await startDevnet({ blockTimeSeconds: 1, outFile: null });
    proxy = await startRpcProxy(devnet.networks["eip155:8453"]!.rpcUrl, "eth_sendRawTransaction");
    // The test runs the reconciler itself, after /settle answered: running
    // in the background it could re-send the journalled bytes while the
    // settle is still retrying and take one of the lost answers.
    fixture = await startEvmService({
      devnet,
      rpcUrl: proxy.url,
      env: { RECONCILE_AFTER_MS: "0" },
      reconcile: false,
      accountName: "lossy",
    });
    ({ service, url, apiKey } = fixture);
  });
  after(async () => {
    await fixture.close();
    await proxy.close();
    await devnet.stop();
  });

  const settle = async (payerIndex: number, amount: string) => {
    const info = devnet.networks["eip155:8453"]!;
    const requirements = requirementsFor({
      network: "eip155:8453",
      usdc: info.assets["USDC"]!,
      payTo: PAY_TO,
      amount,
    });
    const body = {
      x402Version: 2,
      paymentPayload: await signPayment(info.payerPrivateKeys[payerIndex] as Hex, requirements),
      paymentRequirements: requirements,
    };
    return (await (await post(url, "/settle", body, apiKey)).json()) as {
      success: boolean;
      transaction: string;
      errorReason?: string;
    };
  };

  test("lost once: re-sent, recognised as already known, settled once", async () => {
    const info = devnet.networks["eip155:8453"]!;
    const before = await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO);
    proxy.state.drops = 1;
    const res = await settle(0, "111");
    assert.equal(proxy.state.dropped, 1, "the answer was really lost");
    assert.equal(res.success, true, JSON.stringify(res));
    assert.equal(await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO), before + 111n);
    const txs = await service.db.selectFrom("settlement_transactions").selectAll().execute();
    assert.equal(txs.length, 1, "one signed transaction");
  });

  test("lost once and mined before the re-send: the node's nonce-too-low is recognised as ours; settled once", async () => {
    const info = devnet.networks["eip155:8453"]!;
    const before = await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO);
    const txsBefore = (await service.db.selectFrom("settlement_transactions").selectAll().execute())
      .length;
    proxy.state.drops = 1;
    proxy.state.dropped = 0;
    proxy.state.answers = [];
    // The answer is lost only once the transaction is mined: the re-send finds the nonce used.
    proxy.state.dropWhenMined = true;
    try {
      const res = await settle(2, "333");
      assert.equal(proxy.state.dropped, 1, "the answer was really lost");
      assert.equal(res.success, true, JSON.stringify(res));
    } finally {
      proxy.state.dropWhenMined = false;
    }
    assert.match(
      proxy.state.answers.at(-1) ?? "",
      /nonce too low/i,
      "the re-send was answered nonce too low",
    );
    assert.equal(await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO), before + 333n);
    const txs = await service.db.selectFrom("settlement_transactions").selectAll().execute();
    assert.equal(txs.length, txsBefore + 1, "one signed transaction");
  });

  test("lost every time: pending with the hash, then reconciled to succeeded; one transfer", async () => {
    const info = devnet.networks["eip155:8453"]!;
    const before = await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO);
    proxy.state.drops = 3;
    proxy.state.dropped = 0;
    const res = await settle(1, "222");
    assert.equal(proxy.state.dropped, 3);
    assert.equal(res.success, false);
    assert.equal(res.errorReason, "settlement_pending");
    assert.match(res.transaction, /^0x[0-9a-f]{64}$/);
    const row = await until("the reconciler to finish the row", async () => {
      await service.workers.reconciler.runOnce();
      const r = await service.db
        .selectFrom("settlements")
        .selectAll()
        .where("amount", "=", "222")
        .executeTakeFirst();
      return r && r.status !== "pending" ? r : undefined;
    });
    assert.equal(row.status, "succeeded");
    assert.equal(row.transaction, res.transaction);
    assert.equal(
      await usdcBalance(info.rpcUrl, info.assets["USDC"]!, PAY_TO),
      before + 222n,
      "exactly one transfer",
    );
  });
});
