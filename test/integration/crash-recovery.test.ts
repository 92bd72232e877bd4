/**
 * Kill the service (SIGKILL) after it broadcast a settlement and before the
 * receipt, restart it, and check that the record and the chain agree: the
 * settlement is recorded as succeeded with the mined transaction, and the
 * money moved exactly once.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Hex } from "viem";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { openMigratedDb } from "../../src/storage/db.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { freePort, signalAndWait, startServiceProcess, until } from "../support/processes.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";

const PAY_TO = "0x7777777777777777777777777777777777777777" as Hex;

async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return ((await res.json()) as { result: unknown }).result;
}

let devnet: Devnet;
let child: ChildProcess | undefined;

before(async () => {
  // Slow blocks leave a wide window between broadcast and receipt.
  devnet = await startDevnet({ blockTimeSeconds: 4, outFile: null });
});
after(async () => {
  if (child) await signalAndWait(child, "SIGKILL");
  await devnet.stop();
});

test("SIGKILL between broadcast and receipt: restart reconciles, one transfer, record matches chain", async () => {
  const info = devnet.networks["eip155:8453"]!;
  const usdc = info.assets["USDC"] as Hex;
  const dataDir = mkdtempSync(join(tmpdir(), "crash-"));
  const seeded = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  const account = await createAccount(seeded.db, "crash");
  const key = await createApiKey(seeded.db, account.id, "crash");
  await seeded.close();

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    EVM_RPC_URLS_8453: info.rpcUrl,
    EVM_PRIVATE_KEYS: info.facilitatorPrivateKeys.join(","),
    DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: String(port),
    // Production mode, scraped on loopback without a token.
    METRICS_PUBLIC: "true",
    LOG_LEVEL: "warn",
    RECONCILE_AFTER_MS: "0",
  };
  delete (env as Record<string, string | undefined>)["DATABASE_URL"];
  const startService = () => startServiceProcess(url, env);

  child = await startService();
  const requirements = requirementsFor({
    network: "eip155:8453",
    usdc,
    payTo: PAY_TO,
    amount: "4242",
  });
  const body = {
    x402Version: 2,
    paymentPayload: await signPayment(info.payerPrivateKeys[0]!, requirements),
    paymentRequirements: requirements,
  };
  const toBefore = await usdcBalance(info.rpcUrl, usdc, PAY_TO);
  // Hold blocks back so the transaction is certainly unmined when the
  // process dies, however slow the machine.
  await rpc(info.rpcUrl, "evm_setIntervalMining", [0]);
  const inFlight = post(url, "/settle", body, key.key).catch((e: unknown) => e);

  // The moment the settlement transaction reaches the node's pool, kill.
  await until("the settlement transaction in the pool", async () => {
    const pool = (await rpc(info.rpcUrl, "txpool_content")) as { pending: Record<string, unknown> };
    return Object.keys(pool.pending).length > 0;
  });
  // Reaped before the restart: the embedded database's lock checks the pid.
  await signalAndWait(child, "SIGKILL");
  assert.ok((await inFlight) instanceof Error, "the client saw the connection drop");
  assert.equal(
    await usdcBalance(info.rpcUrl, usdc, PAY_TO),
    toBefore,
    "not mined yet when the process died",
  );
  await rpc(info.rpcUrl, "evm_setIntervalMining", [4]);

  child = await startService();
  await until(
    "the transfer to be mined",
    async () => (await usdcBalance(info.rpcUrl, usdc, PAY_TO)) > toBefore,
  );
  // The reconciler decides the row from the chain once the receipt exists.
  await until("the reconciler to record the outcome", async () =>
    /x402_settlements_reconciled_total\{network="eip155:8453",status="succeeded"\} 1/.test(
      await (await fetch(`${url}/metrics`)).text(),
    ),
  );
  await signalAndWait(child, "SIGTERM");
  child = undefined;

  assert.equal(
    await usdcBalance(info.rpcUrl, usdc, PAY_TO),
    toBefore + 4242n,
    "exactly one transfer",
  );
  const db = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  try {
    const rows = await db.db.selectFrom("settlements").selectAll().execute();
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.equal(row.status, "succeeded", `row: ${JSON.stringify(row)}`);
    const txs = await db.db
      .selectFrom("settlement_transactions")
      .selectAll()
      .where("settlement_id", "=", row.id)
      .execute();
    assert.equal(txs.length, 1, "no second transaction was ever signed");
    assert.equal(row.transaction, txs[0]!.reference);
    const receipt = (await rpc(info.rpcUrl, "eth_getTransactionReceipt", [row.transaction])) as {
      status: string;
    };
    assert.equal(receipt.status, "0x1");
  } finally {
    await db.close();
  }
});
