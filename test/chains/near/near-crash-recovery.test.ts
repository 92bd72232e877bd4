/**
 * Kill the service (SIGKILL) after it relayed a NEAR payment and before the
 * transaction landed, and let the node lose the transaction meanwhile.
 * Restarted, the service finds the settlement in its journal, sends the
 * same signed bytes again (the delegate can still run), and records the
 * outcome from the chain: one transfer, one relayed transaction, the record
 * matching the chain. SIGTERM with a settle in flight answers it and exits 0.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNearLedger, type RunningNear } from "../../../devnet/near/index.js";
import { openMigratedDb } from "../../../src/storage/db.js";
import { createAccount } from "../../../src/features/accounts/accounts.js";
import { createApiKey } from "../../../src/features/keys/apiKeys.js";
import { freePort, signalAndWait, startServiceProcess, until } from "../../support/processes.js";
import { post } from "../../support/http.js";
import { nearPayment, nearRequirements, payerKey } from "./payments.js";

let near: RunningNear;
let child: ChildProcess | undefined;

before(async () => {
  near = await startNearLedger({ blockMs: 300 });
});
after(async () => {
  if (child) await signalAndWait(child, "SIGKILL");
  await near.stop();
});

async function service(dataDir: string, port: number): Promise<ChildProcess> {
  const env: Record<string, string | undefined> = {
    ...process.env,
    NEAR_RPC_URL: near.info.rpcUrl,
    NEAR_RELAYER_KEYS: near.info.relayers.map((r) => `${r.accountId}:${r.secretKey}`).join(","),
    DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: String(port),
    // Production mode, scraped on loopback without a token.
    METRICS_PUBLIC: "true",
    LOG_LEVEL: "warn",
    RECONCILE_AFTER_MS: "0",
    SETTLE_TIMEOUT_MS: "20000",
  };
  delete env["DATABASE_URL"];
  return startServiceProcess(`http://127.0.0.1:${port}`, env);
}

test("SIGKILL with a relayed payment in the pool, then the node loses it: restart re-sends the same bytes, one transfer", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "near-crash-"));
  const seeded = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  const account = await createAccount(seeded.db, "near-crash");
  const key = await createApiKey(seeded.db, account.id, "near-crash");
  await seeded.close();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  child = await service(dataDir, port);

  const payer = payerKey(near, 0);
  const usdc = near.ledger.token(near.info.assets.USDC)!;
  const before = { payer: usdc.balanceOf(payer.accountId), payTo: usdc.balanceOf(near.info.payTo) };
  // A delegate that stays valid long enough for the restart.
  const body = await nearPayment(
    near,
    0,
    nearRequirements(near, { amount: "6060", maxTimeoutSeconds: 300 }),
    {
      ahead: 250n,
    },
  );
  near.ledger.withhold();
  let journaled: { reference: string }[] = [];
  try {
    const inFlight = post(url, "/settle", body, key.key).catch((e: unknown) => e);
    await until("the relayed transaction waits in the pool", async () =>
      near.ledger.waiting > 0 ? true : undefined,
    );
    await signalAndWait(child, "SIGKILL");
    child = undefined;
    assert.ok((await inFlight) instanceof Error, "the client saw the connection drop");
    // The node drops what it held: only the journal still has the transaction.
    const db1 = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
    journaled = await db1.db.selectFrom("settlement_transactions").selectAll().execute();
    await db1.close();
    assert.equal(journaled.length, 1, "journaled before it left");
    near.ledger.forget(journaled[0]!.reference);
  } finally {
    // Whatever happened above, the pool is not left holding transactions
    // that a later test's relayer nonces would collide with.
    near.ledger.release();
  }
  assert.equal(near.ledger.transaction(journaled[0]!.reference), undefined);

  child = await service(dataDir, port);
  await until("the reconciler records the outcome", async () =>
    /x402_settlements_reconciled_total\{network="near:mainnet",status="succeeded"\} 1/.test(
      await (await fetch(`${url}/metrics`)).text(),
    ),
  );
  const code = await signalAndWait(child, "SIGTERM");
  child = undefined;
  assert.equal(code, 0);

  assert.equal(usdc.balanceOf(payer.accountId), before.payer - 6060n, "exactly one transfer");
  assert.equal(usdc.balanceOf(near.info.payTo), before.payTo + 6060n);
  const db = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  try {
    const rows = await db.db.selectFrom("settlements").selectAll().execute();
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.status, "succeeded", JSON.stringify(rows[0]));
    assert.equal(rows[0]!.transaction, journaled[0]!.reference);
    const txs = await db.db.selectFrom("settlement_transactions").selectAll().execute();
    assert.equal(txs.length, 1, "no second transaction was ever signed");
    assert.equal(near.ledger.stage(txs[0]!.reference), "FINAL");
  } finally {
    await db.close();
  }
});

test("SIGTERM with NEAR settles in flight: each is answered, the process exits 0", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "near-term-"));
  const seeded = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  const account = await createAccount(seeded.db, "near-term");
  const key = await createApiKey(seeded.db, account.id, "near-term");
  await seeded.close();
  const port = await freePort();
  child = await service(dataDir, port);
  const bodies = await Promise.all(
    [1, 2, 3].map((i) =>
      nearPayment(near, i, nearRequirements(near, { amount: String(7000 + i) })),
    ),
  );
  near.ledger.withhold();
  const answers = bodies.map((b) =>
    post(`http://127.0.0.1:${port}`, "/settle", b, key.key).then(
      async (r) => (await r.json()) as { success: boolean },
    ),
  );
  await until("every relayed transaction waits in the pool", async () =>
    near.ledger.waiting >= 3 ? true : undefined,
  );
  const exited = signalAndWait(child, "SIGTERM");
  near.ledger.release();
  const out = await Promise.all(answers);
  assert.deepEqual(
    out.map((a) => a.success),
    [true, true, true],
  );
  assert.equal(await exited, 0);
  child = undefined;
});
