/**
 * The Confidential tab's "Check each day" in Debian's Chromium (issue 50):
 * a merchant with receipts on two days; the first closes honestly, the
 * second's pool the operator key credits to a slot of its own. The tab shows
 * the honest day as matching (no challenge to send) and the stolen one as
 * short; the merchant's browser wallet (a devnet key behind window.ethereum)
 * sends the challenge, which the tab builds itself from the day's receipts;
 * once the service's batch submits the KMS's answer the merchant's balance
 * holds the shortfall from the bond, the vault is frozen and the tab shows
 * the day as challenged and paid. Its own stack, so it passes alone and in
 * any order.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { chromium, type Browser, type Page } from "playwright-core";
import { createPublicClient, decodeFunctionData, http, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import type { DashboardUser } from "../support/dashboardSession.js";
import { devnetWallet, setEtherBalance } from "../chains/evm/devnetChain.js";
import { paymentRequest, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import {
  confidentialRequirements,
  creditDayToOperatorsOwnSlot,
  enabledMerchant,
  pastNextMidnight,
} from "../chains/evm/confidential.js";
import { dayStart, dayToDate, utcDay } from "../../src/features/confidential/credits.js";
import { confidentialVaultAbi } from "../../src/chains/evm/confidential/vaultAbi.js";

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
const SHOTS = "test-artifacts/screenshots";
const PRICE_ATOMIC = 10_000n;

describe("Confidential tab in Chromium: checking each day and challenging a short one", () => {
  let stack: TestStack;
  let browser: Browser;
  let user: DashboardUser;
  let apiKey: string;
  const wallet = privateKeyToAccount(generatePrivateKey());

  before(async () => {
    const build = spawnSync(process.execPath, ["scripts/build-dashboard.mjs", "--if-stale"], {
      stdio: "inherit",
    });
    assert.equal(build.status, 0, "the dashboard builds");
    mkdirSync(SHOTS, { recursive: true });
    stack = await startStack({
      confidential: true,
      confidentialWorker: false,
      confidentialChallengeWindowSeconds: 2 * 86_400,
    });
    // Enabling through the tab is the dashboard test's; here the merchant starts enabled.
    ({ user, apiKey } = await enabledMerchant(stack, wallet));
    await setEtherBalance(stack.rpcUrl, wallet.address, 10n ** 18n);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  /** A confidential payment to the merchant, settled through /settle on the chain's current day. */
  async function pay(payer: number): Promise<void> {
    // The chain is moved a day ahead of the wall clock the payer's client
    // dates its authorization by: a few days' validity covers both.
    const requirements = {
      ...confidentialRequirements({
        usdc: stack.usdc,
        vault: stack.service.confidential.vault!.address,
        merchant: wallet.address,
      }),
      maxTimeoutSeconds: 3 * 86_400,
    };
    const payload = await signPayment(stack.payerKeys[payer]!, requirements);
    const paid = (await (
      await post(stack.url, "/settle", paymentRequest(requirements, payload.payload), apiKey)
    ).json()) as Record<string, unknown>;
    assert.equal(paid["success"], true, JSON.stringify(paid));
  }

  /** The merchant's session in a browser whose wallet is the merchant's devnet key. */
  async function openTab(): Promise<{ page: Page; sent: Hex[] }> {
    const publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
    const walletClient = devnetWallet(wallet, stack.rpcUrl, await publicClient.getChainId());
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.addCookies([
      {
        name: user.cookie.slice(0, user.cookie.indexOf("=")),
        value: user.cookie.slice(user.cookie.indexOf("=") + 1),
        // __Host- allows no domain attribute: the cookie is the secure
        // origin's (Chromium counts loopback as one), as the service sets it.
        url: stack.url.replace(/^http:/, "https:"),
        httpOnly: true,
        sameSite: "Lax",
      },
    ]);
    const sent: Hex[] = [];
    await context.exposeFunction("__testWallet", async (method: string, params: unknown[]) => {
      if (method === "eth_requestAccounts") return [wallet.address];
      if (method === "eth_sendTransaction") {
        const tx = params[0] as { from: Hex; to: Hex; data: Hex };
        assert.equal(tx.from.toLowerCase(), wallet.address.toLowerCase());
        const hash = await walletClient.sendTransaction({ to: tx.to, data: tx.data });
        sent.push(hash);
        return hash;
      }
      throw new Error(`unsupported wallet method ${method}`);
    });
    // A string, not a function: the test's compiled functions carry helpers
    // that do not exist in the page.
    await context.addInitScript(
      "window.ethereum = { request: ({ method, params }) => window.__testWallet(method, params || []) };",
    );
    const page = await context.newPage();
    await showTab(page);
    return { page, sent };
  }

  /** When each of the day's receipts may be redeemed, as the tab reads it (null: not now). */
  async function redeemableFrom(day: number): Promise<(string | null)[]> {
    const { receipts } = (await (await user.call("/api/confidential/receipts")).json()) as {
      receipts: { day: string | null; redeemableFrom: string | null }[];
    };
    return receipts.filter((r) => r.day === dayToDate(day)).map((r) => r.redeemableFrom);
  }

  async function showTab(page: Page): Promise<void> {
    await page.goto(`${stack.url}/dashboard/`);
    await page
      .getByRole("navigation", { name: "Dashboard sections" })
      .getByRole("link", { name: "Confidential" })
      .click();
    await page.getByRole("heading", { level: 2, name: "Check each day" }).waitFor();
  }

  test("an honest day matches with nothing to send; a stolen day is short, challenged from the browser wallet and paid from the bond", async () => {
    const vault = stack.service.confidential.vault!;
    const publicClient = createPublicClient({ transport: http(stack.rpcUrl) });

    // Day one: paid and closed honestly by the service's own batch.
    await pay(1);
    const firstNow = await pastNextMidnight(stack.rpcUrl, vault, 60);
    const honestDay = utcDay(firstNow) - 1;
    // Closed, its credits held until the challenge window ends.
    assert.deepEqual(await stack.service.confidential.batch!.run(honestDay, firstNow), {
      ran: false,
      day: honestDay,
      why: "challenge-window",
    });
    assert.equal((await vault.dayInfo(honestDay)).phase, "closed");

    // Day two: paid twice, then the operator key credits the pool to itself.
    await pay(1);
    await pay(2);
    const now = await pastNextMidnight(stack.rpcUrl, vault, 60);
    const day = utcDay(now) - 1;
    const stolen = await creditDayToOperatorsOwnSlot(vault, day);
    assert.equal(stolen.pool, 2n * PRICE_ATOMIC);
    // The vault refuses to redeem a payment of a closed day: no Redeem offered.
    assert.deepEqual(await redeemableFrom(honestDay), [null]);
    assert.deepEqual(await redeemableFrom(day), [null, null]);

    const { page, sent } = await openTab();
    // The devnet's contract, as it is: this stack's window, and no bounty.
    await page
      .getByTestId("confidential-devnet")
      .getByText(/has a challenge window of 2 days and no challenge bounty/)
      .waitFor();
    const honestRow = page.getByTestId(`day-${dayToDate(honestDay)}`);
    const shortRow = page.getByTestId(`day-${dayToDate(day)}`);
    await honestRow.getByText("Matches").waitFor();
    assert.deepEqual((await honestRow.locator("td").allTextContents()).slice(0, 2), [
      dayToDate(honestDay),
      "0.010000 USDC",
    ]);
    assert.match(await honestRow.locator("td").nth(2).innerText(), /^1 = 0\.010000 USDC$/);
    assert.equal(await honestRow.getByRole("button").count(), 0, "nothing to challenge");

    await shortRow.getByText("Short", { exact: true }).waitFor();
    assert.equal(await shortRow.locator("td").nth(1).innerText(), "0.000000 USDC");
    assert.equal(await shortRow.locator("td").nth(2).innerText(), "2 = 0.020000 USDC");
    await page.screenshot({ path: `${SHOTS}/confidential-day-short.png`, fullPage: true });

    // The challenge, sent by the merchant's wallet (which pays its gas).
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address);
    const slot = BigInt(
      ((await (await user.call("/api/confidential")).json()) as { slot: string }).slot,
    );
    await shortRow.getByRole("button", { name: "Challenge from my wallet" }).click();
    await shortRow.getByText(/waiting for the contract's check/).waitFor();
    assert.equal(sent.length, 1);
    const receipt = await publicClient.waitForTransactionReceipt({ hash: sent[0]! });
    assert.equal(receipt.status, "success");
    assert.equal(receipt.from.toLowerCase(), wallet.address.toLowerCase());
    assert.equal(receipt.to?.toLowerCase(), vault.address.toLowerCase());
    const tx = await publicClient.getTransaction({ hash: sent[0]! });
    assert.equal(
      decodeFunctionData({ abi: confidentialVaultAbi, data: tx.input }).functionName,
      "challenge",
    );
    assert.equal(await shortRow.getByRole("button").count(), 0, "no second challenge offered");

    // The service's batch submits the KMS's answer instead of releasing the day.
    assert.deepEqual(await stack.service.confidential.batch!.run(day, now), {
      ran: false,
      day,
      why: "disputed",
    });
    assert.equal(await vault.balance(slot), 2n * PRICE_ATOMIC, "the shortfall, from the bond");
    assert.equal(
      await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address),
      before,
      "credited, not sent: nothing in the wallet can refuse it",
    );
    assert.equal(await vault.balance(stolen.slot), 0n, "the thief's slot is paid nothing");
    assert.equal((await vault.dayInfo(day)).phase, "disputed");
    // A disputed day's payments are redeemable at once.
    const dayEnd = dayStart(day + 1).toISOString();
    assert.deepEqual(await redeemableFrom(day), [dayEnd, dayEnd]);
    const frozen = await publicClient.readContract({
      address: vault.address,
      abi: confidentialVaultAbi,
      functionName: "frozen",
    });
    assert.equal(frozen, true, "no next close from this operator key");
    // The day's payments are still the merchant's, pending: redeemable by
    // their receipts on the disputed day, or split again after the resume.
    const rows = await stack.service.db
      .selectFrom("confidential_credits")
      .select(["outcome", "credited_day"])
      .where("account_id", "=", user.accountId)
      .where("day", "=", day)
      .execute();
    assert.equal(rows.length, 2);
    for (const r of rows) assert.deepEqual(r, { outcome: null, credited_day: null });

    // The merchant comes back to the tab later.
    await showTab(page);
    await shortRow
      .getByText(
        "Challenged: the operator's bond paid the 0.020000 USDC shortfall into your balance",
      )
      .waitFor();
    await page.getByTestId("balance-available").getByText("0.020000 USDC").waitFor();
    assert.match(await page.getByTestId("balance-pending").innerText(), /^0\.030000 USDC/);
    assert.equal(await shortRow.locator("td").nth(1).innerText(), "disputed");
    assert.equal(await shortRow.getByRole("button").count(), 0);
    await honestRow.getByText("Matches").waitFor();
    await page.screenshot({ path: `${SHOTS}/confidential-day-challenged.png`, fullPage: true });
  });
});
