/**
 * A dependency failing is not the payer's fault: with the database unable to
 * journal the settlement's transaction, /settle answers 503
 * `service_unavailable`, broadcasts nothing, and records the attempt as
 * `not_attempted`. (The chain's node down, on every family, with /ready,
 * the reachability gauge and the same payment settling once it is back:
 * test/families/outage.test.ts.)
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { sql } from "kysely";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { startEvmService, type EvmService } from "../support/evmService.js";
import type { Service } from "../../src/app.js";

const PAY_TO = "0x8181818181818181818181818181818181818181" as Hex;

describe("a database outage during settle", () => {
  let devnet: Devnet;
  let fixture: EvmService;
  let service: Service;
  let url: string;
  let apiKey: string;

  before(async () => {
    devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null });
    fixture = await startEvmService({
      devnet,
      rpcUrl: devnet.networks["eip155:8453"]!.rpcUrl,
      env: { EVM_RPC_BATCH_SIZE: "0" },
      accountName: "outage",
    });
    ({ service, url, apiKey } = fixture);
  });
  after(async () => {
    await fixture.close();
    await devnet.stop();
  });

  const body = async (payer = 0) => {
    const info = devnet.networks["eip155:8453"]!;
    const requirements = requirementsFor({
      network: "eip155:8453",
      usdc: info.assets["USDC"]!,
      payTo: PAY_TO,
      amount: "700",
    });
    return {
      x402Version: 2,
      paymentPayload: await signPayment(info.payerPrivateKeys[payer] as Hex, requirements),
      paymentRequirements: requirements,
    };
  };

  test("a database that fails to journal the transaction: 503, nothing broadcast, not the payer's failure", async () => {
    const info = devnet.networks["eip155:8453"]!;
    const b = await body(2);
    const rpc = createPublicClient({ transport: http(info.rpcUrl) });
    const nonces = async () => {
      let n = 0;
      for (const key of info.facilitatorPrivateKeys) {
        n += await rpc.getTransactionCount({
          address: privateKeyToAccount(key as Hex).address,
          blockTag: "pending",
        });
      }
      return n;
    };
    const noncesBefore = await nonces();
    await sql`ALTER TABLE settlement_transactions RENAME TO settlement_transactions_away`.execute(
      service.db,
    );
    let res: Response;
    try {
      res = await post(url, "/settle", b, apiKey);
    } finally {
      await sql`ALTER TABLE settlement_transactions_away RENAME TO settlement_transactions`.execute(
        service.db,
      );
    }
    const json = (await res.json()) as Record<string, unknown>;
    assert.equal(res.status, 503, JSON.stringify(json));
    assert.equal(json["error"], "service_unavailable");
    assert.equal(await nonces(), noncesBefore, "nothing was broadcast");
    const payer = privateKeyToAccount(info.payerPrivateKeys[2] as Hex).address.toLowerCase();
    const rows = await service.db
      .selectFrom("settlements")
      .select(["status", "error_reason"])
      .where("payer", "=", payer)
      .execute();
    assert.deepEqual(
      rows.map((r) => [r.status, r.error_reason]),
      [["not_attempted", "service_unavailable"]],
    );
  });
});
