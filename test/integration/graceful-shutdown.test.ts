/**
 * SIGTERM under load, the way a deploy stops a replica: 12 settles in flight
 * on keep-alive connections. Every one of them finishes with its answer, the
 * process then exits 0 by itself (not by the forced exit), hands its signer
 * leases back and closes its database cleanly (the data directory opens
 * again at once).
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, fetch as undiciFetch } from "undici";
import { createPublicClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { openMigratedDb } from "../../src/storage/db.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { freePort, startServiceProcess, until } from "../support/processes.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";

const PAY_TO = "0x9191919191919191919191919191919191919191" as Hex;

let devnet: Devnet;

before(async () => {
  // Blocks slow enough that the settles are still waiting when SIGTERM comes.
  devnet = await startDevnet({ blockTimeSeconds: 2, outFile: null, payers: 12 });
});
after(() => devnet.stop());

test("SIGTERM with 12 settles in flight: all answered, exit 0, leases back, database closed", async () => {
  const info = devnet.networks["eip155:8453"]!;
  const dataDir = mkdtempSync(join(tmpdir(), "shutdown-"));
  const seeded = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  const account = await createAccount(seeded.db, "shutdown");
  const key = await createApiKey(seeded.db, account.id, "shutdown");
  await seeded.close();

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env: Record<string, string | undefined> = {
    ...process.env,
    EVM_RPC_URLS_8453: info.rpcUrl,
    EVM_PRIVATE_KEYS: info.facilitatorPrivateKeys.join(","),
    DATA_DIR: dataDir,
    HOST: "127.0.0.1",
    PORT: String(port),
    LOG_LEVEL: "warn",
    SETTLE_TIMEOUT_MS: "20000",
    SHUTDOWN_DRAIN_MS: "25000",
    // The free plan allows 10 a month; this test is about shutdown, not quotas.
    METER_SETTLEMENTS: "false",
  };
  delete env["DATABASE_URL"];
  let stderr = "";
  // stderr is read from the start: a paused pipe keeps what came before.
  const child = await startServiceProcess(url, env, ["ignore", "ignore", "pipe"]);
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((r) =>
    child.exitCode !== null ? r(child.exitCode) : child.once("exit", (code) => r(code)),
  );

  const rpc = createPublicClient({ transport: http(info.rpcUrl) });
  const signers = info.facilitatorPrivateKeys.map((k) => privateKeyToAccount(k as Hex).address);
  const sent = async () => {
    let n = 0;
    for (const address of signers)
      n += await rpc.getTransactionCount({ address, blockTag: "pending" });
    return n;
  };
  const sentBefore = await sent();

  // Keep-alive connections, as resource servers keep them.
  const agent = new Agent({ keepAliveTimeout: 60_000, connections: 12 });
  const bodies = await Promise.all(
    info.payerPrivateKeys.slice(0, 12).map(async (payerKey) => {
      const requirements = requirementsFor({
        network: "eip155:8453",
        usdc: info.assets["USDC"]!,
        payTo: PAY_TO,
        amount: "300",
      });
      return {
        x402Version: 2,
        paymentPayload: await signPayment(payerKey as Hex, requirements),
        paymentRequirements: requirements,
      };
    }),
  );
  // A first request on each connection, so they are open and idle-then-busy.
  await Promise.all(
    Array.from({ length: 12 }, () => undiciFetch(`${url}/supported`, { dispatcher: agent })),
  );
  const answers = bodies.map(async (b) => {
    const res = await undiciFetch(`${url}/settle`, {
      method: "POST",
      dispatcher: agent,
      headers: { "content-type": "application/json", "x-api-key": key.key },
      body: JSON.stringify(b),
    });
    return { status: res.status, json: (await res.json()) as { success: boolean } };
  });

  // SIGTERM once all 12 transactions were broadcast (most still unmined:
  // a block comes every 2 s).
  await until("12 settlements broadcast", async () => (await sent()) - sentBefore >= 12);
  child.kill("SIGTERM");

  const results = await Promise.all(answers);
  assert.deepEqual(
    results.map((r) => [r.status, r.json.success]),
    Array.from({ length: 12 }, () => [200, true]),
    "every in-flight settle finished with its answer",
  );
  const code = await exited;
  assert.equal(code, 0, `exited by itself, cleanly:\n${stderr}`);
  assert.match(stderr, /stopped cleanly/);
  await agent.close();

  const reopened = await openMigratedDb({ dataDir: join(dataDir, "pglite") });
  try {
    const rows = await reopened.db.selectFrom("settlements").select("status").execute();
    assert.deepEqual(
      rows.map((r) => r.status),
      Array.from({ length: 12 }, () => "succeeded"),
    );
    const leases = await reopened.db.selectFrom("signer_leases").selectAll().execute();
    assert.equal(leases.length, 0, "every signer lease was handed back");
  } finally {
    await reopened.close();
  }
});
