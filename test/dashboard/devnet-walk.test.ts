/**
 * A newcomer's first minutes, in Chromium: the devnet started as `npm start`
 * starts it, a payment with the example (`paid-api.ts`, then `pay.ts`), and
 * a sign-in through the devnet's own provider with a name never seen
 * before. The dashboard shows the devnet's account: that payment in
 * Overview and Settlements, and the banner's key (masked) in API Keys.
 *
 * Explorer links: the devnet's chains are local, and a public explorer knows
 * nothing of their transactions, so a settlement there shows its hash (the
 * full one on hover, to look up on the local chain) and no link.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { chromium, type Browser, type Page } from "playwright-core";
import { startDevnetService, type DevnetService } from "../support/devnetService.js";
import { freePort, until } from "../support/processes.js";

const CHROMIUM = process.env["CHROMIUM_PATH"] ?? "/usr/bin/chromium";
const SHOTS = "test-artifacts/screenshots";

let devnet: DevnetService;
let browser: Browser;
/** What pay.ts printed: its transaction. */
let transaction: string;

before(async () => {
  const build = spawnSync(process.execPath, ["scripts/build-dashboard.mjs", "--if-stale"], {
    stdio: "inherit",
  });
  assert.equal(build.status, 0, "the dashboard builds");
  mkdirSync(SHOTS, { recursive: true });
  devnet = await startDevnetService(["eip155:8453"]);
  const port = await freePort();
  await devnet.example("paid-api.ts", ["--port", String(port)], /pay it: /);
  const pay = await devnet.example("pay.ts", [`http://127.0.0.1:${port}/weather`]);
  assert.equal(await pay.exited, 0, pay.output());
  transaction = /^transaction (0x[0-9a-f]{64})$/m.exec(pay.output())![1]!;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
  if (devnet) assert.equal(await devnet.stop(), 0, devnet.output());
});

async function signIn(provider: string): Promise<Page> {
  const page = await (
    await browser.newContext({ viewport: { width: 1280, height: 900 } })
  ).newPage();
  await page.goto(`${devnet.url}/dashboard/`);
  await page.getByRole("link", { name: `Continue with ${provider}` }).click();
  await page.locator('input[name="login"]').fill(`newcomer-${randomBytes(4).toString("hex")}`);
  await page.locator('input[name="password"]').fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
  return page;
}

async function tab(page: Page, name: string): Promise<void> {
  await page
    .getByRole("navigation", { name: "Dashboard sections" })
    .getByRole("link", { name })
    .click();
  await page.getByRole("heading", { level: 1, name }).waitFor();
}

test("start, pay with the example, sign in: the payment in Overview and Settlements, the banner's key in API Keys", async () => {
  const page = await signIn("Devnet ID");

  // Overview: the example's payment, counted and in the month's volume.
  const today = page.locator(".card", { hasText: "Settlements today" }).locator(".card-value");
  await until("the overview count", async () =>
    (await today.textContent()) === "1" ? true : undefined,
  );
  const volume = page.locator("section", { hasText: "Volume this month" }).getByRole("row");
  assert.deepEqual(await volume.nth(1).getByRole("cell").allTextContents(), [
    "eip155:8453",
    "USDC",
    "1",
    "0.001 USDC",
  ]);
  await page.screenshot({ path: `${SHOTS}/devnet-overview.png`, fullPage: true });

  // Settlements: the transaction pay.ts printed, succeeded, by the devnet key;
  // its hash whole on hover and no explorer link (a local chain's).
  await tab(page, "Settlements");
  const shortTx = `${transaction.slice(0, 8)}…${transaction.slice(-6)}`;
  const row = page.getByRole("row", { name: new RegExp(shortTx) });
  await row.waitFor();
  const cells = await row.getByRole("cell").allTextContents();
  assert.equal(cells[1], "succeeded");
  assert.match(cells[2]!, /^0\.001 USDC/);
  assert.deepEqual(cells.slice(3, 6), ["eip155:8453", "exact", "devnet"]);
  const txCell = row.getByRole("cell").last();
  assert.equal(await txCell.textContent(), shortTx);
  assert.equal(await txCell.locator("span").getAttribute("title"), transaction);
  assert.equal(await txCell.getByRole("link").count(), 0, "no explorer link on a local chain");
  await page.screenshot({ path: `${SHOTS}/devnet-settlements.png`, fullPage: true });

  // API Keys: the banner's key, masked, and nowhere whole.
  await tab(page, "API Keys");
  const key = page.getByRole("row", { name: /^devnet / });
  assert.deepEqual((await key.getByRole("cell").allTextContents()).slice(0, 2), [
    "devnet",
    `${devnet.apiKey.slice(0, 12)}…`,
  ]);
  assert.ok(!(await page.content()).includes(devnet.apiKey), "the full key is not shown");
  await page.screenshot({ path: `${SHOTS}/devnet-api-keys.png`, fullPage: true });
});

test("a second person, through the other devnet provider, joins the same account", async () => {
  const [first, second] = [await signIn("Devnet ID"), await signIn("Devnet SSO")];
  const accountOf = async (page: Page) =>
    (
      (await (await page.request.get(`${devnet.url}/api/session`)).json()) as {
        account: { id: string; name: string };
      }
    ).account;
  const [a, b] = [await accountOf(first), await accountOf(second)];
  assert.equal(a.name, "devnet");
  assert.equal(b.id, a.id);
});
