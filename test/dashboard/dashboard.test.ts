/**
 * The dashboard in a real browser: Debian's Chromium driven by
 * playwright-core, against the service with the built web app and two local
 * OpenID providers (the devnet's), all on loopback. Each test signs in its
 * own users, so the tests pass alone and in any order. Screenshots of every
 * tab go to test-artifacts/screenshots/.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes, randomUUID } from "node:crypto";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { Webhook } from "standardwebhooks";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { declareDiscoveryExtension } from "@x402/extensions/bazaar";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { apiKeyAuth } from "../support/resourceServer.js";
import { freePort, until } from "../support/processes.js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Hex } from "viem";
import { confidentialRequirements, withdrawTypedDataFromJson } from "../chains/evm/confidential.js";
import { usdcBalance } from "../chains/evm/payments.js";
import { DEVNET_BILLING_PAY_TO } from "../../src/config/index.js";
import {
  startLocalIdentityProviders,
  type LocalIdentityProviders,
} from "../../devnet/identityProviders.js";

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
const SHOTS = "test-artifacts/screenshots";
const PAY_TO = "0x000000000000000000000000000000000000dEaD";

describe("dashboard in Chromium", () => {
  let stack: TestStack;
  let idps: LocalIdentityProviders;
  let browser: Browser;
  const contexts: BrowserContext[] = [];

  before(async () => {
    const build = spawnSync(process.execPath, ["scripts/build-dashboard.mjs", "--if-stale"], {
      stdio: "inherit",
    });
    assert.equal(build.status, 0, "the dashboard builds");
    mkdirSync(SHOTS, { recursive: true });
    const port = await freePort();
    idps = await startLocalIdentityProviders({ redirectOrigins: [`http://127.0.0.1:${port}`] });
    const env: Record<string, string> = {
      PORT: String(port),
      METER_SETTLEMENTS: "true",
      WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
      AUTH_PROVIDERS: idps.providers.map((p) => p.id).join(","),
    };
    for (const p of idps.providers) {
      const prefix = `AUTH_${p.id.toUpperCase().replace(/-/g, "_")}_`;
      env[`${prefix}ISSUER`] = p.issuer;
      env[`${prefix}CLIENT_ID`] = p.clientId;
      env[`${prefix}CLIENT_SECRET`] = p.clientSecret;
      env[`${prefix}LABEL`] = p.label;
    }
    stack = await startStack({ env, confidential: true, confidentialWorker: false });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  });

  after(async () => {
    await Promise.all(contexts.map((c) => c.close().catch(() => undefined)));
    await browser?.close();
    await stack?.stop();
    await idps?.stop();
  });

  async function signIn(
    providerLabel: string,
    opts: { width?: number } = {},
  ): Promise<{ page: Page; context: BrowserContext; login: string }> {
    const context = await browser.newContext({
      viewport: { width: opts.width ?? 1280, height: 900 },
    });
    contexts.push(context);
    const page = await context.newPage();
    watchPolicy(page);
    const login = `user-${randomBytes(4).toString("hex")}`;
    await page.goto(`${stack.url}/dashboard/`);
    await page.getByRole("link", { name: `Continue with ${providerLabel}` }).click();
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill("any password");
    await page.getByRole("button", { name: "Sign-in" }).click();
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    return { page, context, login };
  }

  /** Content-Security-Policy refusals Chromium reported on the service's pages. */
  const policyRefusals: string[] = [];
  function watchPolicy(page: Page): void {
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text()) && page.url().startsWith(stack.url))
        policyRefusals.push(`${page.url()}: ${m.text()}`);
    });
  }

  async function tab(page: Page, name: string): Promise<void> {
    await page
      .getByRole("navigation", { name: "Dashboard sections" })
      .getByRole("link", { name })
      .click();
    await page.getByRole("heading", { level: 1, name }).waitFor();
  }

  async function accountOf(page: Page): Promise<{ id: string; csrf: string }> {
    const res = await page.request.get(`${stack.url}/api/session`);
    const s = (await res.json()) as { account: { id: string }; csrfToken: string };
    return { id: s.account.id, csrf: s.csrfToken };
  }

  async function createKey(page: Page, name: string): Promise<string> {
    await tab(page, "API Keys");
    await page.getByLabel("Key name").fill(name);
    await page.getByRole("button", { name: "Create key" }).click();
    return (await page.getByTestId("new-key").textContent())!.trim();
  }

  async function pay(apiKey: string, payer = 0) {
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
    });
    const payload = await signPayment(stack.payerKeys[payer]!, requirements);
    const client = new HTTPFacilitatorClient({
      url: stack.url,
      createAuthHeaders: apiKeyAuth(apiKey),
    });
    return client.settle(payload, requirements);
  }

  test("signs in with each provider (first sign-in makes a free account), and signs out", async () => {
    const accounts: string[] = [];
    for (const provider of idps.providers) {
      const { page, context, login } = await signIn(provider.label);
      await page.getByText(`${login}@${provider.id}.devnet`).waitFor();
      const { id } = await accountOf(page);
      accounts.push(id);
      const identity = await stack.service.db
        .selectFrom("identities")
        .innerJoin("accounts", "accounts.id", "identities.account_id")
        .select(["identities.issuer", "identities.subject", "accounts.plan"])
        .where("identities.account_id", "=", id)
        .executeTakeFirstOrThrow();
      assert.equal(identity.issuer, provider.issuer);
      assert.equal(identity.subject, login);
      assert.equal(identity.plan, "free");

      const cookies = await context.cookies();
      const session = cookies.find((c) => c.name === "__Host-x402-session");
      assert.ok(session?.httpOnly && session.secure && session.sameSite === "Lax");

      await page.getByRole("button", { name: "Sign out" }).click();
      await page.getByRole("heading", { name: "Sign in to the x402 facilitator" }).waitFor();
      const rows = await stack.service.db
        .selectFrom("dashboard_sessions")
        .select("id")
        .where("account_id", "=", id)
        .execute();
      assert.equal(rows.length, 0, "sign-out deleted the session row");
      assert.equal((await page.request.get(`${stack.url}/api/session`)).status(), 401);
    }
    assert.notEqual(accounts[0], accounts[1], "two providers, two identities, two accounts");
    const { page } = await signIn(idps.providers[0]!.label, { width: 375 });
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to the x402 facilitator" }).waitFor();
    await page.screenshot({ path: `${SHOTS}/sign-in-375.png`, fullPage: true });
  });

  test("a key is shown once, pays through the official client, shows in Settlements and Overview, and stops at once when deleted", async () => {
    const { page } = await signIn(idps.providers[0]!.label);
    const key = await createKey(page, "production");
    assert.match(key, /.{20,}/);
    await page.screenshot({ path: `${SHOTS}/api-keys.png`, fullPage: true });
    await page.reload();
    await page.getByRole("cell", { name: "production", exact: true }).waitFor();
    assert.ok(!(await page.content()).includes(key), "the full key is not shown again");

    const settled = await pay(key);
    assert.equal(settled.success, true);
    await tab(page, "Settlements");
    const shortTx = `${settled.transaction.slice(0, 8)}…${settled.transaction.slice(-6)}`;
    await page.getByText(shortTx).waitFor();
    await page.getByText("0.01 USDC").first().waitFor();
    await page.screenshot({ path: `${SHOTS}/settlements.png`, fullPage: true });
    await tab(page, "Overview");
    const today = page.locator(".card", { hasText: "Settlements today" }).locator(".card-value");
    await until("the overview count", async () =>
      (await today.textContent()) === "1" ? true : undefined,
    );
    await page.screenshot({ path: `${SHOTS}/overview.png`, fullPage: true });
    await page.setViewportSize({ width: 375, height: 800 });
    await page.screenshot({ path: `${SHOTS}/overview-375.png`, fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });

    await tab(page, "Metrics");
    await page.getByRole("heading", { name: "Settlements", exact: true }).waitFor();
    await page.locator(".uplot").first().waitFor();
    await page.screenshot({ path: `${SHOTS}/metrics.png`, fullPage: true });

    await tab(page, "API Keys");
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Delete key production" }).click();
    await page.getByText("No API keys yet").waitFor();
    const refused = await post(
      stack.url,
      "/settle",
      { x402Version: 2, paymentPayload: {}, paymentRequirements: {} },
      key,
    );
    assert.equal(refused.status, 401);
  });

  test("a webhook test delivery reaches a loopback receiver, signed, and shows in the delivery log", async () => {
    const received: { verified: boolean; type: string }[] = [];
    let secret = "";
    const receiver: Server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        try {
          const event = new Webhook(secret).verify(body, req.headers as Record<string, string>) as {
            type: string;
          };
          received.push({ verified: true, type: event.type });
          res.writeHead(204).end();
        } catch {
          received.push({ verified: false, type: "" });
          res.writeHead(400).end();
        }
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    try {
      const { page } = await signIn(idps.providers[1]!.label);
      await tab(page, "Webhooks");
      await page
        .getByLabel("Endpoint URL")
        .fill(`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`);
      await page.getByRole("button", { name: "Save endpoint" }).click();
      secret = (await page.getByTestId("webhook-secret").textContent())!.trim();
      assert.match(secret, /^whsec_/);
      await page.getByRole("button", { name: "Send test delivery" }).click();
      await until("a delivery", async () => (received.length > 0 ? true : undefined));
      assert.deepEqual(received[0], { verified: true, type: "webhook.test" });
      await page.locator("table.deliveries").getByText("delivered").waitFor();
      await page
        .locator("table.deliveries")
        .getByRole("cell", { name: "204", exact: true })
        .waitFor();
      await page.screenshot({ path: `${SHOTS}/webhooks.png`, fullPage: true });
    } finally {
      await new Promise((r) => receiver.close(r));
    }
  });

  test("Plans at the quota limit: choose Pro, pay with the browser wallet (EIP-1193, a devnet key) through @x402/fetch; Pro until the right date, the history lists it, /settle goes through", async () => {
    const { page, context } = await signIn(idps.providers[0]!.label);
    const key = await createKey(page, "quota");
    const { id } = await accountOf(page);
    const month = new Date().toISOString().slice(0, 7);
    await stack.service.db
      .insertInto("quota_usage")
      .values({ account_id: id, month, used: 10 })
      .onConflict((oc) => oc.columns(["account_id", "month"]).doUpdateSet({ used: 10 }))
      .execute();
    await assert.rejects(
      pay(key, 1),
      (e: Error & { statusCode?: number }) => e.statusCode === 402 || /\(402\)/.test(e.message),
      "the free plan's limit refuses the settle with 402",
    );
    // The person's wallet, as an extension would inject it: it signs with a
    // funded devnet key, on the billing network's chain.
    const wallet = privateKeyToAccount(stack.payerKeys[3]!);
    await context.exposeFunction("__testWallet", async (method: string, params: unknown[]) => {
      if (method === "eth_requestAccounts" || method === "eth_accounts") return [wallet.address];
      if (method === "eth_chainId") return "0x2105";
      if (method === "eth_signTypedData_v4") {
        const typed = JSON.parse(params[1] as string) as {
          domain: Record<string, unknown>;
          types: Record<string, { name: string; type: string }[]>;
          primaryType: string;
          message: Record<string, unknown>;
        };
        const { EIP712Domain: _domain, ...types } = typed.types;
        return wallet.signTypedData({ ...typed, types } as Parameters<
          typeof wallet.signTypedData
        >[0]);
      }
      throw new Error(`unsupported wallet method ${method}`);
    });
    await page.addInitScript(
      "window.ethereum = { request: ({ method, params }) => window.__testWallet(method, params || []) };",
    );
    await page.reload();
    await tab(page, "Plans");
    await page.getByText("10 of 10 settlements used this month").waitFor();
    await page.getByText("No payments yet.").waitFor();
    // Swap settlement is announced where a merchant looks for capabilities.
    assert.match(
      (await page.getByTestId("swap-settlement").textContent()) ?? "",
      /Swap settlement .* is experimental and not\s+available yet/,
    );
    await page.screenshot({ path: `${SHOTS}/plans-before.png`, fullPage: true });

    const treasury = DEVNET_BILLING_PAY_TO as Hex;
    const before = await usdcBalance(stack.rpcUrl, stack.usdc, treasury);
    const payerBefore = await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address);
    const paidAt = Date.now();
    await page.getByRole("button", { name: "Choose Pro", exact: true }).click();
    await page.getByTestId("pay-panel").getByText("Pay for Pro: 49.00 USD").waitFor();
    await page.screenshot({ path: `${SHOTS}/plans-pay.png`, fullPage: true });
    await page.getByRole("button", { name: "Pay with browser wallet" }).click();
    const status = page.getByRole("status").filter({ hasText: "Paid." });
    await status.waitFor({ timeout: 30_000 });

    const row = await stack.service.db
      .selectFrom("accounts")
      .select(["plan", "paid_until"])
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    assert.equal(row.plan, "pro");
    const until = row.paid_until!;
    assert.ok(
      until.getTime() >= paidAt + 30 * 86_400_000 &&
        until.getTime() <= Date.now() + 30 * 86_400_000,
      "paid for 30 days from the payment",
    );
    const date = until.toISOString().slice(0, 10);
    assert.equal(
      (await status.textContent())?.trim(),
      `Paid. You are on the Pro plan until ${date}.`,
    );
    await page.getByTestId("plan-period").getByText(`Pro until ${date}, then Free`).waitFor();
    const history = page.locator("table.billing-history");
    await history.getByText("Pro", { exact: true }).waitFor();
    await history.getByText("49.00 USD").waitFor();
    await history.getByText(stack.network).waitFor();
    const payment = await stack.service.db
      .selectFrom("billing_payments")
      .select(["transaction", "source", "status"])
      .where("account_id", "=", id)
      .executeTakeFirstOrThrow();
    assert.deepEqual([payment.source, payment.status], ["dashboard", "paid"]);
    await history.getByText(payment.transaction!.slice(0, 8), { exact: false }).waitFor();
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, treasury), before + 49_000_000n);
    assert.equal(
      await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address),
      payerBefore - 49_000_000n,
    );
    await page.screenshot({ path: `${SHOTS}/plans-after.png`, fullPage: true });
    const csv = await (await page.request.get(`${stack.url}/api/billing/history.csv`)).text();
    assert.match(csv, new RegExp(`plan,pro,49\\.00,${stack.network},${payment.transaction}`));

    const settled = await pay(key, 1);
    assert.equal(settled.success, true, "Pro lets /settle through at once");

    // On the devnet, a funded devnet key pays too (here: a pay-as-you-go top-up).
    await page.getByLabel(/^Amount \(USD/).fill("2");
    await page.getByRole("button", { name: "Top up", exact: true }).click();
    await page.getByRole("button", { name: /^Pay with devnet payer 1 / }).click();
    await page
      .getByRole("status")
      .filter({ hasText: "Paid. Your pay-as-you-go balance is 2.00 USD." })
      .waitFor({ timeout: 30_000 });
    await history.getByText("Top-up").waitFor();
    await history.getByText("2.00 USD").waitFor();
    await page.screenshot({ path: `${SHOTS}/plans-topped-up.png`, fullPage: true });
    await history.screenshot({ path: `${SHOTS}/billing-history.png` });
    await tab(page, "Overview");
    await page.getByText(`pro plan until ${date}`).waitFor();
  });

  test("an account whose settlements keep failing on-chain is warned on Overview that the network is held off, and Metrics shows the gas they cost", async () => {
    const { page } = await signIn(idps.providers[1]!.label);
    const key = await createKey(page, "failing");
    const { id } = await accountOf(page);
    const db = stack.service.db;
    const keyId = (
      await db
        .selectFrom("api_keys")
        .select("id")
        .where("account_id", "=", id)
        .executeTakeFirstOrThrow()
    ).id;
    // The free plan's limit: 20 settlements that failed on-chain, 1 to 20
    // minutes ago; and 2 on another network, under it.
    const now = Date.now();
    const failed = Array.from({ length: 22 }, (_, i) => ({
      id: randomUUID(),
      account_id: id,
      api_key_id: keyId,
      network: i < 20 ? stack.network : "eip155:10",
      scheme: "exact",
      payer: "0xpayer",
      pay_to: PAY_TO,
      asset: stack.usdc,
      amount: "10000",
      payload_fingerprint: `held-off-${randomUUID()}`,
      status: "failed" as const,
      transaction: `0x${randomBytes(32).toString("hex")}`,
      error_reason: "invalid_transaction_state",
      started_at: new Date(now - (i + 1) * 60_000 - 1_000),
      finished_at: new Date(now - (i + 1) * 60_000),
    }));
    await db.insertInto("settlements").values(failed).execute();
    await db
      .insertInto("settlement_transactions")
      .values(
        failed.map((f) => ({
          reference: f.transaction,
          settlement_id: f.id,
          network: f.network,
          signer: "0xsigner",
          replaces: null,
          detail: "{}",
          status: "reverted" as const,
        })),
      )
      .execute();
    await db
      .updateTable("settlement_transactions")
      .set({ fee: "42000000000000" })
      .where(
        "reference",
        "in",
        failed.map((f) => f.transaction),
      )
      .execute();
    await assert.rejects(
      pay(key),
      (e: Error & { statusCode?: number }) => e.statusCode === 429 || /\(429\)/.test(e.message),
      "/settle on the network answers 429",
    );

    // Settles resume when the 20th most recent failure is an hour old.
    const resumes = new Date(now - 20 * 60_000 + 3_600_000).toISOString().slice(11, 16);
    // A fresh load, as when the merchant opens the dashboard after a 429 (the
    // Overview read moments ago is otherwise kept until its next refresh).
    await page.reload();
    await tab(page, "Overview");
    const warning = page.getByRole("alert", { name: `Settles on ${stack.network} held off` });
    await warning
      .getByText(
        `Settles on ${stack.network} are held off until ${resumes} UTC: 20 settlements failed on-chain in the last hour (free plan allows 20).`,
      )
      .waitFor();
    await warning.getByText("Check the payments you send").waitFor();
    await page
      .getByText(
        "2 settlements on eip155:10 failed on-chain in the last hour; at 20 (free plan) settles there are held off for up to an hour.",
      )
      .waitFor();
    assert.equal(await page.getByRole("alert").count(), 1, "only the held-off network warns");
    await page.screenshot({ path: `${SHOTS}/overview-held-off.png`, fullPage: true });

    await tab(page, "Metrics");
    const gas = page.locator("table.gas");
    const row = gas.getByRole("row", { name: new RegExp(stack.network) });
    await row.getByRole("cell", { name: "0.00084 ETH", exact: true }).waitFor();
    assert.deepEqual(await row.getByRole("cell").allTextContents(), [
      stack.network,
      "20",
      "20",
      "0.00084 ETH",
    ]);
    await page.screenshot({ path: `${SHOTS}/metrics-gas.png`, fullPage: true });
  });

  test("a second account sees none of the first's keys, settlements or webhooks, and gets 404 for their ids", async () => {
    const first = await signIn(idps.providers[0]!.label);
    const key = await createKey(first.page, "mine");
    const settled = await pay(key, 2);
    assert.equal(settled.success, true);
    const firstAccount = await accountOf(first.page);
    await first.page.request.put(`${stack.url}/api/webhooks`, {
      headers: { "x-csrf-token": firstAccount.csrf },
      data: { url: "http://127.0.0.1:9/unused" },
    });
    const keyId = (
      await stack.service.db
        .selectFrom("api_keys")
        .select("id")
        .where("account_id", "=", firstAccount.id)
        .executeTakeFirstOrThrow()
    ).id;
    const settlementId = (
      await stack.service.db
        .selectFrom("settlements")
        .select("id")
        .where("account_id", "=", firstAccount.id)
        .executeTakeFirstOrThrow()
    ).id;

    const second = await signIn(idps.providers[1]!.label);
    const other = await accountOf(second.page);
    assert.notEqual(other.id, firstAccount.id);
    await tab(second.page, "API Keys");
    await second.page.getByText("No API keys yet").waitFor();
    await tab(second.page, "Settlements");
    await second.page.getByText("No settlements match.").waitFor();
    await tab(second.page, "Webhooks");
    await second.page.getByText("No events yet.").waitFor();
    assert.equal(await second.page.getByLabel("Endpoint URL").inputValue(), "");

    const headers = { "x-csrf-token": other.csrf };
    const del = await second.page.request.delete(`${stack.url}/api/keys/${keyId}`, { headers });
    assert.equal(del.status(), 404);
    const get = await second.page.request.get(`${stack.url}/api/settlements/${settlementId}`);
    assert.equal(get.status(), 404);
    const stillLive = await stack.service.db
      .selectFrom("api_keys")
      .select("revoked_at")
      .where("id", "=", keyId)
      .executeTakeFirstOrThrow();
    assert.equal(stillLive.revoked_at, null);

    await tab(second.page, "Confidential");
    await second.page.getByText("Confidential settlement credits").waitFor();
    await second.page.screenshot({ path: `${SHOTS}/confidential.png`, fullPage: true });
  });

  test("Confidential tab: fee first, enable with the browser wallet, live offer mode, receipts, a withdrawal above the balance moves nothing", async () => {
    const { page, context } = await signIn(idps.providers[0]!.label);
    // The merchant's own wallet, as a browser wallet extension would inject it.
    const wallet = privateKeyToAccount(generatePrivateKey());
    await context.exposeFunction("__testWallet", async (method: string, params: unknown[]) => {
      if (method === "eth_requestAccounts") return [wallet.address];
      if (method === "personal_sign")
        return wallet.signMessage({ message: { raw: params[0] as Hex } });
      if (method === "eth_signTypedData_v4") {
        return wallet.signTypedData(
          withdrawTypedDataFromJson(JSON.parse(params[1] as string) as Record<string, unknown>),
        );
      }
      throw new Error(`unsupported wallet method ${method}`);
    });
    // A string, not a function: the test's compiled functions carry helpers
    // that do not exist in the page.
    await page.addInitScript(
      "window.ethereum = { request: ({ method, params }) => window.__testWallet(method, params || []) };",
    );
    await page.reload();
    const { id: accountId } = await accountOf(page);
    await tab(page, "Confidential");
    await page.getByTestId("confidential-fee").getByText("counts as 2 settlements").waitFor();
    // The slot's viewer: an address of the merchant's own checking tools.
    const viewer = privateKeyToAccount(generatePrivateKey()).address;
    await page.getByLabel("Viewer address (optional)").fill(viewer);
    await page.getByRole("button", { name: "Connect wallet and enable" }).click();
    await page.getByTestId("merchant-address").getByText(wallet.address).waitFor();
    await page.getByTestId("confidential-viewer").getByText(viewer, { exact: false }).waitFor();
    const row = await stack.service.db
      .selectFrom("confidential_merchants")
      .select(["merchant_address", "slot", "mode", "viewer_address"])
      .where("account_id", "=", accountId)
      .executeTakeFirstOrThrow();
    assert.equal(row.merchant_address, wallet.address.toLowerCase());
    assert.equal(row.viewer_address?.toLowerCase(), viewer.toLowerCase());
    const slotViewer = await stack.service.confidential.vault!.viewerOf(BigInt(row.slot!));
    assert.equal(slotViewer?.toLowerCase(), viewer.toLowerCase(), "the vault holds it");
    assert.match(row.slot ?? "", /^\d+$/);
    assert.equal(row.mode, "both");

    await page.getByRole("radio", { name: /Confidential/ }).click();
    await until("the mode is saved", async () => {
      const m = await stack.service.db
        .selectFrom("confidential_merchants")
        .select("mode")
        .where("account_id", "=", accountId)
        .executeTakeFirstOrThrow();
      return m.mode === "confidential" ? true : undefined;
    });
    await until("the page shows the saved mode", async () =>
      (await page.getByRole("radio", { name: /Confidential/ }).isChecked()) ? true : undefined,
    );

    // A confidential payment from an official client's signature shows as a receipt.
    const apiKey = await createKey(page, "shop");
    const vault = stack.service.confidential.vault!;
    const requirements = confidentialRequirements({
      usdc: stack.usdc,
      vault: vault.address,
      merchant: wallet.address,
    });
    const payload = await signPayment(stack.payerKeys[2]!, requirements);
    const settled = (await (
      await post(
        stack.url,
        "/settle",
        { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
        apiKey,
      )
    ).json()) as { success: boolean };
    assert.equal(settled.success, true);
    await tab(page, "Confidential");
    await page.locator("table.receipts").getByText("pending").waitFor();
    await page.locator("table.receipts").getByText("0.010000 USDC").waitFor();
    // The balance: pending until its day's batch, nothing available yet.
    await page.getByTestId("balance-pending").getByText("0.010000 USDC").waitFor();
    await page.getByTestId("balance-available").getByText("0.000000 USDC").waitFor();
    // What an observer of the chain learns, stated as it is.
    await page
      .getByTestId("confidential-observer")
      .getByText(/whether your balance covered it/)
      .waitFor();
    // On the devnet, what its contract lacks.
    await page
      .getByTestId("confidential-devnet")
      .getByText(/has no challenge window \(.*\) and no challenge bounty/)
      .waitFor();

    // Nothing is available before the daily batch: the withdrawal debits nothing.
    await page.getByLabel("Amount (USDC)").fill("0.01");
    await page.getByRole("button", { name: "Sign and withdraw" }).click();
    await page.locator("table.withdrawals").getByText("finalized").waitFor();
    const w = await stack.service.db
      .selectFrom("confidential_withdrawals")
      .select(["state", "paid_amount", "amount"])
      .where("account_id", "=", accountId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(w, { state: "finalized", paid_amount: "0", amount: "10000" });
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, wallet.address), 0n);
    await page.screenshot({ path: `${SHOTS}/confidential-enabled.png`, fullPage: true });
  });

  test("Catalog tab: the account's entry with its state, and its challenge made on request", async () => {
    const { page } = await signIn(idps.providers[0]!.label);
    const key = await createKey(page, "catalog");
    const url = `https://catalog-tab-${randomBytes(3).toString("hex")}.example.org/tides`;
    const { bazaar } = declareDiscoveryExtension({ output: { example: { tide: "high" } } });
    const declared = structuredClone(bazaar) as unknown as {
      info: { input: Record<string, unknown> };
    };
    declared.info.input["method"] = "GET";
    const requirements = requirementsFor({
      network: stack.network,
      usdc: stack.usdc,
      payTo: PAY_TO,
    });
    const payload = {
      ...(await signPayment(stack.payerKeys[0]!, requirements)),
      resource: { url, description: "Tide tables", mimeType: "application/json" },
      extensions: { bazaar: declared },
    };
    const res = await post(
      stack.url,
      "/verify",
      { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements },
      key,
    );
    assert.equal(res.status, 200);
    await tab(page, "Catalog");
    const row = page.getByRole("row").filter({ hasText: url });
    await row.waitFor();
    await row.getByText("unproven").waitFor();
    await page.getByRole("button", { name: "Make my challenge" }).click();
    const token = (await page.getByTestId("catalog-challenge").textContent())!.trim();
    assert.match(token, /^x402-catalog-[A-Za-z0-9_-]{32}$/);
    await page.screenshot({ path: `${SHOTS}/catalog.png`, fullPage: true });
  });

  test("every tab works under the Content-Security-Policy, with nothing refused", async () => {
    const before = policyRefusals.length;
    const { page } = await signIn(idps.providers[0]!.label);
    const response = await page.goto(`${stack.url}/dashboard/`);
    assert.match(
      (await response?.allHeaders())?.["content-security-policy"] ?? "",
      /script-src 'self'/,
    );
    await page.getByRole("button", { name: "Sign out" }).waitFor();
    for (const name of [
      "Overview",
      "Metrics",
      "Settlements",
      "Plans",
      "API Keys",
      "Webhooks",
      "Confidential",
      "Catalog",
    ]) {
      await tab(page, name);
    }
    await createKey(page, "under the policy");
    assert.deepEqual(policyRefusals.slice(before), [], "no script, style or request refused");
    assert.deepEqual(policyRefusals, [], "nor on any other test's pages so far");
  });

  test("the sign-in page shows a fixed message for a known code and a generic one otherwise, never the URL's text", async () => {
    const context = await browser.newContext();
    contexts.push(context);
    const page = await context.newPage();
    watchPolicy(page);
    const alert = page.getByRole("alert");
    await page.goto(`${stack.url}/dashboard/?signInError=cancelled`);
    await page
      .getByText("Sign-in was cancelled or refused by the provider. You can try again.")
      .waitFor();
    const injected = "Your account is locked: call +1-555-0100 <b>now</b>";
    await page.goto(`${stack.url}/dashboard/?signInError=${encodeURIComponent(injected)}`);
    await page.getByText("Sign-in did not complete. Please try again.").waitFor();
    assert.equal(await alert.count(), 1);
    const shown = await page.locator("main").textContent();
    assert.ok(!shown?.includes("555-0100"), shown ?? "");
    // The whole round trip: a provider's error reaches the page as a code.
    await page.goto(
      `${stack.url}/auth/callback/${idps.providers[0]!.id}?error=access_denied&error_description=${encodeURIComponent(injected)}`,
    );
    await page
      .getByText("Sign-in was cancelled or refused by the provider. You can try again.")
      .waitFor();
    assert.equal(new URL(page.url()).search, "?signInError=cancelled");
    assert.ok(!(await page.content()).includes("555-0100"));
  });

  test("a dashboard call without a session is 401, and one without the CSRF token is refused", async () => {
    const anonymous = await fetch(`${stack.url}/api/keys`);
    assert.equal(anonymous.status, 401);
    assert.equal(((await anonymous.json()) as { error: string }).error, "unauthorized");
    const { page } = await signIn(idps.providers[0]!.label);
    const { id } = await accountOf(page);
    const forged = await page.request.post(`${stack.url}/api/keys`, { data: { name: "forged" } });
    assert.equal(forged.status(), 403);
    const keys = await stack.service.db
      .selectFrom("api_keys")
      .select("id")
      .where("account_id", "=", id)
      .execute();
    assert.equal(keys.length, 0);
  });
});
