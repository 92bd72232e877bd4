/**
 * A merchant's own check of its confidential credits, for a merchant who
 * never opens the dashboard (run it daily, e.g. from cron): for each day of
 * its receipts still in its challenge window, the slot's credit as the vault
 * holds it against what the day's receipts add up to, from
 * GET /confidential/days. With --challenge, each short day's receipts are
 * presented to the vault from the withdrawal wallet itself, which the vault
 * pays from the operator bond once the KMS has answered (the service, or
 * anyone, submits the answer).
 *
 *   CONFIDENTIAL_CHECK_URL=https://…            the facilitator (required)
 *   CONFIDENTIAL_CHECK_API_KEY=…                one of the account's API keys (or CONFIDENTIAL_CHECK_API_KEY_FILE)
 *   --challenge                                 also send the challenges; then:
 *   CONFIDENTIAL_CHECK_WALLET_KEY_FILE=/run/…   the withdrawal wallet's private key
 *   CONFIDENTIAL_CHECK_RPC_URL=https://…        the vault's chain (Base)
 *
 *   npm run confidential:check [-- --challenge]
 *
 * Exit status: 0 no day is short; 2 a day is short (challenged with
 * --challenge); 1 the check could not run.
 */
import { readFileSync } from "node:fs";
import { createPublicClient, createWalletClient, defineChain, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { DayCheck } from "../src/features/confidential/credits.js";

function setting(name: string): string {
  const file = process.env[`${name}_FILE`]?.trim();
  const v = (file ? readFileSync(file, "utf8") : process.env[name])?.trim();
  if (!v) throw new Error(`set ${name} (or ${name}_FILE)`);
  return v;
}

const usdc = (atomic: string | null) => (atomic === null ? "-" : (Number(atomic) / 1e6).toFixed(6));

async function main(): Promise<number> {
  const challenge = process.argv.includes("--challenge");
  const base = setting("CONFIDENTIAL_CHECK_URL").replace(/\/+$/, "");
  const res = await fetch(`${base}/confidential/days`, {
    headers: { "X-API-Key": setting("CONFIDENTIAL_CHECK_API_KEY") },
  });
  if (!res.ok)
    throw new Error(`GET /confidential/days answered ${res.status}: ${await res.text()}`);
  const { days } = (await res.json()) as { days: DayCheck[] };
  if (days.length === 0)
    process.stdout.write("no day of your receipts is in its challenge window\n");
  for (const d of days) {
    process.stdout.write(
      `${d.day}  ${d.phase.padEnd(8)}  credit ${usdc(d.credit).padStart(14)}  receipts ${String(d.receipts).padStart(4)} = ${usdc(d.receiptsTotal).padStart(14)}  ${d.shortfall ? "SHORT" : "ok"}${d.windowEndsAt ? `  (challengeable until ${d.windowEndsAt})` : ""}\n`,
    );
  }
  const short = days.filter((d) => d.shortfall);
  if (short.length === 0) return 0;
  if (!challenge) {
    process.stdout.write(
      "run again with --challenge to present the short days' receipts from your wallet\n",
    );
    return 2;
  }
  const rpcUrl = setting("CONFIDENTIAL_CHECK_RPC_URL");
  const account = privateKeyToAccount(setting("CONFIDENTIAL_CHECK_WALLET_KEY") as Hex);
  const probe = createPublicClient({ transport: http(rpcUrl) });
  const chain = defineChain({
    id: await probe.getChainId(),
    name: "vault chain",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const client = createPublicClient({ chain, transport: http(rpcUrl) });
  const wallet = createWalletClient({ chain, transport: http(rpcUrl), account });
  for (const d of short) {
    if (!d.challenge) continue; // every receipt of it was presented already
    if (d.challenge.from.toLowerCase() !== account.address.toLowerCase()) {
      throw new Error(`the challenge must come from ${d.challenge.from}, not ${account.address}`);
    }
    process.stdout.write(`${d.day}: presenting its receipts from ${account.address}…\n`);
    const hash = await wallet.sendTransaction({ to: d.challenge.to, data: d.challenge.data });
    const receipt = await client.waitForTransactionReceipt({ hash });
    process.stdout.write(
      `${d.day}: challenge ${receipt.status} in ${hash} (${receipt.gasUsed} gas)\n`,
    );
    if (receipt.status !== "success") throw new Error(`the challenge of ${d.day} reverted`);
  }
  return 2;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`confidential check failed: ${(e as Error).message}\n`);
    process.exit(1);
  },
);
