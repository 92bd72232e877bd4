/**
 * The merchant's side of a challenge, end to end (issue 50): a payment
 * settled through /settle, then the operator key (through the service's own
 * vault client) credits the day's pool to a slot of its own and gets it
 * closed. The merchant's check, GET /confidential/days (with its API key, as
 * `npm run confidential:check` reads it, and in the dashboard) shows the
 * shortfall; the check script, run as a merchant runs it, presents the
 * receipts from the withdrawal wallet; the service's batch submits the KMS's
 * answer instead of releasing the day: the merchant is paid from the bond,
 * the thief's slot is paid nothing.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, createWalletClient, http, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import type { DashboardUser } from "../support/dashboardSession.js";
import { setEtherBalance } from "../chains/evm/devnetChain.js";
import { paymentRequest, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { utcDay } from "../../src/features/confidential/credits.js";
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
  challenge: { from: Hex; to: Hex; data: Hex } | null;
}

function runCheck(env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "scripts/confidential-check.ts", "--challenge"],
      { env: { ...process.env, ...env }, timeout: 120_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number(err.code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

describe("a merchant's challenge, end to end", () => {
  let stack: TestStack;
  let user: DashboardUser;
  let apiKey: string;
  // A second merchant paid the same day, who does not challenge at first.
  let other: DashboardUser;
  let otherApiKey: string;
  const otherWallet = privateKeyToAccount(generatePrivateKey());
  let dir: string;
  const walletKey = generatePrivateKey();
  const wallet = privateKeyToAccount(walletKey);

  before(async () => {
    stack = await startStack({
      confidential: true,
      confidentialWorker: false,
      confidentialChallengeWindowSeconds: 2 * 86_400,
    });
    ({ user, apiKey } = await enabledMerchant(stack, wallet));
    ({ user: other, apiKey: otherApiKey } = await enabledMerchant(stack, otherWallet));
    for (const address of [wallet.address, otherWallet.address]) {
      await setEtherBalance(stack.rpcUrl, address, 10n ** 18n);
    }
    dir = mkdtempSync(join(tmpdir(), "confidential-check-"));
  });
  after(async () => {
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const days = async () => {
    const res = await fetch(`${stack.url}/confidential/days`, { headers: { "X-API-Key": apiKey } });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { days: DayCheck[] }).days;
  };

  test("the operator key takes a day's pool: the check shows it, the script challenges from the wallet, the bond pays the merchant and the thief gets nothing", async () => {
    const vault = stack.service.confidential.vault!;
    const contract = vault.address;
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: contract,
      merchant: wallet.address,
    });
    const payload = await signPayment(stack.payerKeys[1]!, requirements);
    const paid = (await (
      await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), apiKey)
    ).json()) as Record<string, unknown>;
    assert.equal(paid["success"], true, JSON.stringify(paid));
    const otherRequirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: contract,
      merchant: otherWallet.address,
    });
    const otherPayload = await signPayment(stack.payerKeys[2]!, otherRequirements);
    const otherPaid = (await (
      await post(
        stack.url,
        "/settle",
        paymentRequest(otherRequirements, otherPayload.payload),
        otherApiKey,
      )
    ).json()) as Record<string, unknown>;
    assert.equal(otherPaid["success"], true, JSON.stringify(otherPaid));

    // The key holder's own slot, and the whole day's pool credited to it.
    const now = await pastNextMidnight(stack.rpcUrl, vault, 60);
    const day = utcDay(now) - 1;
    const stolen = await creditDayToOperatorsOwnSlot(vault, day);
    const thiefSlot = stolen.slot;
    assert.equal(stolen.pool, 2n * PRICE_ATOMIC);
    assert.notEqual(stolen.releasableAfter, null, "released before its challenge window ended");

    // The merchant's check: through its API key and in the dashboard alike.
    const [check] = await days();
    assert.ok(check);
    assert.deepEqual(
      {
        phase: check.phase,
        credit: check.credit,
        receipts: check.receipts,
        receiptsTotal: check.receiptsTotal,
        shortfall: check.shortfall,
        from: check.challenge?.from,
        to: check.challenge?.to,
      },
      {
        phase: "closed",
        credit: "0",
        receipts: 1,
        receiptsTotal: PRICE_ATOMIC.toString(),
        shortfall: true,
        from: wallet.address,
        to: contract,
      },
    );
    const viaDashboard = (await (await user.call("/api/confidential/days")).json()) as {
      days: DayCheck[];
    };
    assert.deepEqual(viaDashboard.days, [check]);

    // The script, as the merchant runs it: it presents the receipts itself.
    const keyFile = join(dir, "wallet.key");
    writeFileSync(keyFile, walletKey, { mode: 0o600 });
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address);
    const run = await runCheck({
      CONFIDENTIAL_CHECK_URL: stack.url,
      CONFIDENTIAL_CHECK_API_KEY: apiKey,
      CONFIDENTIAL_CHECK_WALLET_KEY_FILE: keyFile,
      CONFIDENTIAL_CHECK_RPC_URL: stack.rpcUrl,
    });
    assert.equal(run.code, 2, run.out);
    assert.match(run.out, /SHORT/);
    assert.match(run.out, /challenge success/);

    // The batch submits the KMS's answer rather than release the day.
    const outcome = await stack.service.confidential.batch!.run(day, now);
    assert.deepEqual(outcome, { ran: false, day, why: "disputed" });
    assert.equal(
      (await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address)) - before,
      PRICE_ATOMIC,
      "paid in full from the bond",
    );
    assert.equal(await vault.balance(thiefSlot), 0n);
    assert.equal((await vault.dayInfo(day)).phase, "disputed");
    const [after] = await days();
    assert.deepEqual(
      { phase: after?.phase, shortfall: after?.shortfall, challenge: after?.challenge },
      { phase: "disputed", shortfall: true, challenge: null },
    );
    // What the vault paid is recorded: the row is bond_paid, not pending.
    assert.equal(after?.paidFromBond, PRICE_ATOMIC.toString());
    const row = await stack.service.db
      .selectFrom("confidential_credits")
      .select(["outcome", "credited_day"])
      .where("account_id", "=", user.accountId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { outcome: "bond_paid", credited_day: null });
    const listed = (await (await user.call("/api/confidential/receipts")).json()) as {
      receipts: { state: string; redeemableFrom: string | null }[];
    };
    assert.deepEqual(
      listed.receipts.map((r) => [r.state, r.redeemableFrom]),
      [["bond_paid", null]],
    );
    const balance = (await (await user.call("/api/confidential/balance")).json()) as Record<
      string,
      unknown
    >;
    assert.deepEqual([balance["pending"], balance["paidFromBond"]], ["0", PRICE_ATOMIC.toString()]);

    // The other merchant did not challenge: the vault paid it nothing, so
    // its payment stays pending and its check offers the challenge, which a
    // disputed day pays at once; the next pass records it paid.
    const otherRow = () =>
      stack.service.db
        .selectFrom("confidential_credits")
        .select(["outcome", "credited_day"])
        .where("account_id", "=", other.accountId)
        .executeTakeFirstOrThrow();
    assert.deepEqual(await otherRow(), { outcome: null, credited_day: null });
    const [otherCheck] = (
      (await (await other.call("/api/confidential/days")).json()) as { days: DayCheck[] }
    ).days;
    assert.deepEqual([otherCheck?.phase, otherCheck?.paidFromBond], ["disputed", "0"]);
    assert.ok(otherCheck?.challenge);
    const otherBefore = await usdcBalance(stack.rpcUrl, stack.usdc, otherWallet.address);
    const hash = await createWalletClient({
      account: otherWallet,
      transport: http(stack.rpcUrl),
    }).sendTransaction({
      chain: null,
      to: otherCheck.challenge.to,
      data: otherCheck.challenge.data,
    });
    const sent = await createPublicClient({
      transport: http(stack.rpcUrl),
    }).waitForTransactionReceipt({
      hash,
    });
    assert.equal(sent.status, "success");
    assert.deepEqual(await stack.service.confidential.batch!.run(day, now), {
      ran: false,
      day,
      why: "disputed",
    });
    assert.equal(
      (await usdcBalance(stack.rpcUrl, stack.usdc, otherWallet.address)) - otherBefore,
      PRICE_ATOMIC,
    );
    assert.deepEqual(await otherRow(), { outcome: "bond_paid", credited_day: null });
  });
});
