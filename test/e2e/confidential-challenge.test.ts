/**
 * The merchant's side of a challenge, end to end (issues 50 and 65): two
 * payments settled through /settle, each committed to its merchant's slot
 * when collected; the resource server keeps the receipt of its own from the
 * settle answer. Then the operator key (through the service's own vault
 * client) credits the day's pool to a slot of its own and gets it closed.
 *
 * - The merchant's check, `npm run confidential:check --challenge` run as a
 *   merchant runs it (its receipt file, the vault and slot from its own
 *   settings, a gas key that is not its withdrawal wallet), builds the
 *   challenge itself and sends it.
 * - The other merchant does nothing: the service's batch, finding the
 *   closed split short of its own plan, challenges for it with its receipts.
 * - The batch submits the KMS's answers instead of releasing the day: the
 *   bond pays each shortfall into each merchant's balance, the thief's slot
 *   is paid nothing, and each merchant's own payment is redeemed to it.
 * - A facilitator that answers the check with crafted calldata (a USDC
 *   transfer out of the wallet) gets nothing sent: the check never reads it.
 * - A facilitator that reports the stolen day's credit as covering the
 *   receipts fools a check without the viewer key; with the slot's viewer
 *   key (named at enablement) the check decrypts the credit the vault holds
 *   itself and finds the day short.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  type Hex,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import type { DashboardUser } from "../support/dashboardSession.js";
import { setEtherBalance } from "../chains/evm/devnetChain.js";
import { paymentRequest, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { utcDay } from "../../src/features/confidential/credits.js";
import { receiptIn, redeemCall } from "../../src/clients/confidential/receipts.js";
import { ReceiptStore } from "../../src/clients/confidential/receiptStore.js";
import {
  confidentialRequirements,
  creditDayToOperatorsOwnSlot,
  enabledMerchant,
  pastNextMidnight,
} from "../chains/evm/confidential.js";

const PRICE_ATOMIC = 10_000n;

interface DayCheck {
  day: string;
  phase: string;
  credit: string | null;
  receipts: number;
  receiptsTotal: string;
  shortfall: boolean;
  paidFromBond: string;
  unpresented: unknown[];
}

function runCheck(
  env: Record<string, string>,
  flags: string[] = ["--challenge"],
): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "scripts/confidential-check.ts", ...flags],
      { env: { ...process.env, ...env }, timeout: 120_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number(err.code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

/** A stand-in facilitator answering every request with `answer`, for the length of `use`. */
async function withStandIn<T>(answer: unknown, use: (url: string) => Promise<T>): Promise<T> {
  const server: Server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(answer));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  try {
    return await use(`http://127.0.0.1:${port}`);
  } finally {
    server.close();
  }
}

describe("a merchant's challenge, end to end", () => {
  let stack: TestStack;
  let user: DashboardUser;
  let apiKey: string;
  // A second merchant paid the same day, who does nothing.
  let other: DashboardUser;
  let otherApiKey: string;
  const wallet = privateKeyToAccount(generatePrivateKey());
  const otherWallet = privateKeyToAccount(generatePrivateKey());
  // The slot's viewer: a key of the merchant's tools, named at enablement.
  const viewerKey = generatePrivateKey();
  // Pays the challenge's gas: not the withdrawal wallet, which stays unlinked.
  const gasKey = generatePrivateKey();
  const gasAccount = privateKeyToAccount(gasKey);
  let dir: string;
  let day: number;
  let now: Date;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "confidential-check-"));
    stack = await startStack({
      confidential: true,
      confidentialWorker: false,
      confidentialChallengeWindowSeconds: 2 * 86_400,
      // The check's own fhEVM mock reads the inputs the service encrypted.
      confidentialInputsDir: dir,
    });
    ({ user, apiKey } = await enabledMerchant(
      stack,
      wallet,
      privateKeyToAccount(viewerKey).address,
    ));
    ({ user: other, apiKey: otherApiKey } = await enabledMerchant(stack, otherWallet));
    for (const address of [wallet.address, otherWallet.address, gasAccount.address]) {
      await setEtherBalance(stack.rpcUrl, address, 10n ** 18n);
    }
  });
  after(async () => {
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const daysOf = async (key: string) => {
    const res = await fetch(`${stack.url}/confidential/days`, { headers: { "X-API-Key": key } });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { days: DayCheck[] }).days;
  };
  const slotOf = async (u: DashboardUser) =>
    ((await (await u.call("/api/confidential")).json()) as { slot: string }).slot;

  test("the operator key takes a day's pool: the merchant's own check challenges it, the service challenges for the merchant who does nothing, the bond pays both shortfalls and the thief gets nothing", async () => {
    const vault = stack.service.confidential.vault!;
    const contract = vault.address;
    const store = new ReceiptStore(join(dir, "receipts.jsonl"));
    const settleFor = async (w: typeof wallet, key: string, payer: number) => {
      const requirements = confidentialRequirements({
        usdc: stack.usdc,
        vault: contract,
        merchant: w.address,
      });
      const payload = await signPayment(stack.payerKeys[payer]!, requirements);
      const paid = (await (
        await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), key)
      ).json()) as Record<string, unknown>;
      assert.equal(paid["success"], true, JSON.stringify(paid));
      return receiptIn(paid)!;
    };
    // The merchant's resource server keeps its receipt from the settle answer.
    const mine = await settleFor(wallet, apiKey, 1);
    store.add(mine);
    const theirs = await settleFor(otherWallet, otherApiKey, 2);

    // The key holder's own slot, and the whole day's pool credited to it.
    now = await pastNextMidnight(stack.rpcUrl, vault, 60);
    day = utcDay(now) - 1;
    const stolen = await creditDayToOperatorsOwnSlot(vault, day);
    assert.equal(stolen.pool, 2n * PRICE_ATOMIC);
    assert.notEqual(stolen.releasableAfter, null, "released before its challenge window ended");

    // What the service says: the same through the API key and the dashboard.
    const [check] = await daysOf(apiKey);
    assert.ok(check);
    assert.deepEqual(
      {
        phase: check.phase,
        credit: check.credit,
        receipts: check.receipts,
        shortfall: check.shortfall,
        unpresented: check.unpresented,
      },
      { phase: "closed", credit: "0", receipts: 1, shortfall: true, unpresented: [mine] },
    );
    const viaDashboard = (await (await user.call("/api/confidential/days")).json()) as {
      days: DayCheck[];
    };
    assert.deepEqual(viaDashboard.days, [check]);

    // A service that says the credit covers the receipts fools a check that
    // takes the credit from it; the viewer key decrypts the vault's own.
    const lying = { days: [{ ...check, credit: check.receiptsTotal, shortfall: false }] };
    const viewerFile = join(dir, "viewer.key");
    writeFileSync(viewerFile, viewerKey, { mode: 0o600 });
    const own = {
      CONFIDENTIAL_CHECK_API_KEY: apiKey,
      CONFIDENTIAL_CHECK_RPC_URL: stack.rpcUrl,
      CONFIDENTIAL_CHECK_VAULT_ADDRESS: contract,
      CONFIDENTIAL_CHECK_SLOT: await slotOf(user),
      CONFIDENTIAL_CHECK_RECEIPTS_FILE: store.file,
    };
    await withStandIn(lying, async (url) => {
      const fooled = await runCheck({ ...own, CONFIDENTIAL_CHECK_URL: url }, []);
      assert.equal(fooled.code, 0, fooled.out);
      assert.match(fooled.out, /credit +0\.010000 .* ok/);
      const viewed = await runCheck(
        {
          ...own,
          CONFIDENTIAL_CHECK_URL: url,
          CONFIDENTIAL_CHECK_VIEWER_KEY_FILE: viewerFile,
          CONFIDENTIAL_CHECK_FHEVM: "devnet",
          CONFIDENTIAL_CHECK_DEVNET_INPUTS_FILE: join(dir, "8453.fhevm-inputs.jsonl"),
        },
        [],
      );
      assert.equal(viewed.code, 2, viewed.out);
      assert.match(viewed.out, /credit +0\.000000 .* SHORT .*the service said 0\.010000/);
    });
    // The service's own viewer's key is not the slot's: refused, nothing decrypted.
    const wrongFile = join(dir, "wrong-viewer.key");
    writeFileSync(wrongFile, generatePrivateKey(), { mode: 0o600 });
    const wrong = await runCheck(
      {
        ...own,
        CONFIDENTIAL_CHECK_URL: stack.url,
        CONFIDENTIAL_CHECK_VIEWER_KEY_FILE: wrongFile,
        CONFIDENTIAL_CHECK_FHEVM: "devnet",
        CONFIDENTIAL_CHECK_DEVNET_INPUTS_FILE: join(dir, "8453.fhevm-inputs.jsonl"),
      },
      [],
    );
    assert.equal(wrong.code, 1, wrong.out);
    assert.match(wrong.out, /viewer on-chain is/);

    // The merchant's check, from its own receipts and settings.
    const keyFile = join(dir, "gas.key");
    writeFileSync(keyFile, gasKey, { mode: 0o600 });
    const walletUsdc = await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address);
    const run = await runCheck({
      CONFIDENTIAL_CHECK_URL: stack.url,
      CONFIDENTIAL_CHECK_API_KEY: apiKey,
      CONFIDENTIAL_CHECK_RPC_URL: stack.rpcUrl,
      CONFIDENTIAL_CHECK_VAULT_ADDRESS: contract,
      CONFIDENTIAL_CHECK_SLOT: await slotOf(user),
      CONFIDENTIAL_CHECK_RECEIPTS_FILE: store.file,
      CONFIDENTIAL_CHECK_WALLET_KEY_FILE: keyFile,
    });
    assert.equal(run.code, 2, run.out);
    assert.match(run.out, /SHORT/);
    assert.match(run.out, /challenge success/);
    assert.ok(await vault.presented(mine.key));
    assert.equal(await vault.presented(theirs.key), false, "the other merchant did nothing");

    // The batch checks the closed split against its plan, challenges the
    // other merchant's slot with its receipt, and submits every answer.
    const outcome = await stack.service.confidential.batch!.run(day, now);
    assert.deepEqual(outcome, { ran: false, day, why: "disputed" });
    assert.ok(await vault.presented(theirs.key), "the service challenged for it");
    assert.equal((await vault.dayInfo(day)).phase, "disputed");
    assert.equal(await vault.balance(BigInt(await slotOf(user))), PRICE_ATOMIC, "its shortfall");
    assert.equal(await vault.balance(BigInt(await slotOf(other))), PRICE_ATOMIC);
    assert.equal(await vault.balance(stolen.slot), 0n, "the thief is paid nothing");
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address), walletUsdc);

    const [after] = await daysOf(apiKey);
    assert.deepEqual(
      { phase: after?.phase, paidFromBond: after?.paidFromBond, unpresented: after?.unpresented },
      { phase: "disputed", paidFromBond: PRICE_ATOMIC.toString(), unpresented: [] },
    );

    // Its own payment is the merchant's on the disputed day: redeemed with
    // its receipt, by any account, only to its slot.
    const gasWallet = createWalletClient({ account: gasAccount, transport: http(stack.rpcUrl) });
    const chain = createPublicClient({ transport: http(stack.rpcUrl) });
    const call = redeemCall(contract, mine);
    const hash = await gasWallet.sendTransaction({ chain: null, to: call.to, data: call.data });
    assert.equal((await chain.waitForTransactionReceipt({ hash })).status, "success");
    assert.equal(await vault.balance(BigInt(await slotOf(user))), 2n * PRICE_ATOMIC);
  });

  test("a facilitator that answers the check with crafted calldata gets nothing sent: the check builds its own transactions", async () => {
    const vault = stack.service.confidential.vault!;
    const attacker = privateKeyToAccount(generatePrivateKey()).address;
    const theft = encodeFunctionData({
      abi: erc20Abi,
      functionName: "transfer",
      args: [attacker, 10n ** 12n],
    });
    // Its USDC is what a malicious answer is after.
    const minted = await usdcBalance(stack.rpcUrl, stack.usdc, gasAccount.address);
    const crafted = {
      days: [
        {
          day: new Date(day * 86_400_000).toISOString().slice(0, 10),
          phase: "closed",
          windowEndsAt: null,
          credit: "0",
          receipts: 1,
          receiptsTotal: "10000",
          shortfall: true,
          paidFromBond: "0",
          unpresented: [{ vault: stack.usdc, key: `0x${"11".repeat(32)}`, calldata: theft }],
          challenge: { from: gasAccount.address, to: stack.usdc, data: theft },
          to: stack.usdc,
          data: theft,
        },
      ],
    };
    const server: Server = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(crafted));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as { port: number };
    const keyFile = join(dir, "gas.key");
    writeFileSync(keyFile, gasKey, { mode: 0o600 });
    const chain = createPublicClient({ transport: http(stack.rpcUrl) });
    const nonceBefore = await chain.getTransactionCount({ address: gasAccount.address });
    try {
      const run = await runCheck({
        CONFIDENTIAL_CHECK_URL: `http://127.0.0.1:${port}`,
        CONFIDENTIAL_CHECK_API_KEY: "any",
        CONFIDENTIAL_CHECK_RPC_URL: stack.rpcUrl,
        CONFIDENTIAL_CHECK_VAULT_ADDRESS: vault.address,
        CONFIDENTIAL_CHECK_SLOT: await slotOf(user),
        CONFIDENTIAL_CHECK_WALLET_KEY_FILE: keyFile,
      });
      assert.doesNotMatch(run.out, /challenge success|presenting/, run.out);
    } finally {
      server.close();
    }
    assert.equal(
      await chain.getTransactionCount({ address: gasAccount.address }),
      nonceBefore,
      "the check sent a transaction the service built",
    );
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, gasAccount.address), minted);
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, attacker as Hex), 0n);
  });
});
