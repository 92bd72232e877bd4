/**
 * A merchant's own check of its confidential credits, for a merchant who
 * never opens the dashboard: run it daily, e.g. from cron, as a watcher of
 * its own. For each day of its receipts still in its challenge window, the
 * slot's credit against what the day's receipts add up to; with
 * --challenge, each short day's receipts are presented to the vault.
 *
 * It trusts the chain and the merchant's own records, not the facilitator:
 * - the vault and the slot come from this script's own settings, never from
 *   an answer of the service;
 * - every receipt, from the merchant's own store (`keepReceipts`,
 *   src/clients/confidential/receiptStore.ts) or from the service's
 *   `GET /confidential/days`, is checked on-chain before it counts: it must
 *   open the commitment the vault stored for the payment to this slot;
 * - the one transaction it sends is `challenge(day, slot, openings)` to the
 *   configured vault, built here from those receipts (whatever else the
 *   service's answer carries is never read);
 * - a day of its own receipts that the vault shows closed and in its window
 *   but the service leaves out is treated as short.
 * With the slot's viewer key (`CONFIDENTIAL_CHECK_VIEWER_KEY`: the key of the
 * viewer address named at enablement, which the vault lets decrypt the
 * slot's pending credits and balance) it takes nothing from the service but
 * the list of days: it checks on-chain that the key is the slot's viewer and
 * decrypts each day's credit itself, through the fhEVM's user decryption.
 * Without it, it takes the slot's credit from the service, which decrypts it
 * with the operator's permission: a service that lies about it can then hide
 * a shortfall from this check, never make it send anything else.
 *
 *   CONFIDENTIAL_CHECK_URL=https://…            the facilitator (required)
 *   CONFIDENTIAL_CHECK_API_KEY=…                one of the account's API keys (or CONFIDENTIAL_CHECK_API_KEY_FILE)
 *   CONFIDENTIAL_CHECK_RPC_URL=https://…        a node of the vault's chain you trust
 *   CONFIDENTIAL_CHECK_VAULT_ADDRESS=0x…        the vault (the dashboard shows it)
 *   CONFIDENTIAL_CHECK_SLOT=12                  your slot (the dashboard shows it)
 *   CONFIDENTIAL_CHECK_RECEIPTS_FILE=/var/…     your own receipt store (optional, recommended)
 *   CONFIDENTIAL_CHECK_VIEWER_KEY_FILE=/run/…   your slot's viewer key (optional, recommended); then:
 *   CONFIDENTIAL_CHECK_FHEVM=/etc/…json         the fhEVM's relayer and contracts as JSON
 *                                               ({ relayerUrl, relayerApiKey?, aclAddress,
 *                                               executorAddress, kmsVerifierAddress,
 *                                               inputVerifierAddress, decryptionAddress,
 *                                               inputVerificationAddress, gatewayChainId }:
 *                                               the service's CONFIDENTIAL_* values), or
 *                                               `devnet` for the devnet's mock, with
 *   CONFIDENTIAL_CHECK_DEVNET_INPUTS_FILE=…     the devnet's <chainId>.fhevm-inputs.jsonl
 *   --challenge                                 also send the challenges; then:
 *   CONFIDENTIAL_CHECK_WALLET_KEY_FILE=/run/…   the key that pays their gas: any funded
 *                                               account (a challenge names the slot, not you)
 *
 *   npm run confidential:check [-- --challenge]
 *
 * Exit status: 0 no day is short; 2 a day is short (challenged with
 * --challenge); 1 the check could not run.
 */
import { readFileSync } from "node:fs";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  http,
  type Address,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { DayCheck } from "../src/features/confidential/credits.js";
import {
  fheClient,
  relayerFheClient,
  type FheClient,
  type FhevmNetworkSettings,
} from "../src/chains/evm/confidential/fhe.js";
import { slotViewer, type SlotViewer } from "../src/clients/confidential/viewer.js";
import {
  challengeCall,
  checkReceipt,
  merchantVaultAbi,
  receiptIn,
  vaultPaymentReader,
  type ConfidentialReceipt,
} from "../src/clients/confidential/receipts.js";
import { ReceiptStore } from "../src/clients/confidential/receiptStore.js";

function setting(name: string): string {
  const file = process.env[`${name}_FILE`]?.trim();
  const v = (file ? readFileSync(file, "utf8") : process.env[name])?.trim();
  if (!v) throw new Error(`set ${name} (or ${name}_FILE)`);
  return v;
}

/** User decryption for the viewer: Zama's relayer, or the devnet's mock. */
async function viewerFhe(chainId: number, rpcUrl: string): Promise<FheClient> {
  const where = setting("CONFIDENTIAL_CHECK_FHEVM");
  if (where === "devnet") {
    const { startDevnetFhevm } = await import("../devnet/evm/fhevm.js");
    const mock = await startDevnetFhevm({
      rpcUrl,
      chainId,
      cleartextFile: setting("CONFIDENTIAL_CHECK_DEVNET_INPUTS_FILE"),
    });
    return fheClient(mock.instance);
  }
  const settings = JSON.parse(readFileSync(where, "utf8")) as FhevmNetworkSettings;
  return relayerFheClient(settings, { chainId, rpcUrl });
}

const usdc = (atomic: string | bigint | null) =>
  atomic === null ? "-" : (Number(atomic) / 1e6).toFixed(6);
const dayOf = (iso: string) => Math.floor(Date.parse(`${iso}T00:00:00Z`) / 86_400_000);
const dateOf = (day: number) => new Date(day * 86_400_000).toISOString().slice(0, 10);

async function main(): Promise<number> {
  const sendChallenges = process.argv.includes("--challenge");
  const base = setting("CONFIDENTIAL_CHECK_URL").replace(/\/+$/, "");
  const rpcUrl = setting("CONFIDENTIAL_CHECK_RPC_URL");
  const vault = getAddress(setting("CONFIDENTIAL_CHECK_VAULT_ADDRESS"));
  const slot = BigInt(setting("CONFIDENTIAL_CHECK_SLOT"));
  const storeFile = process.env["CONFIDENTIAL_CHECK_RECEIPTS_FILE"]?.trim();
  const client = createPublicClient({ transport: http(rpcUrl) });
  const readPayment = vaultPaymentReader(client as never, vault);
  const read = <T>(functionName: string, args: unknown[] = []) =>
    client.readContract({
      address: vault,
      abi: merchantVaultAbi,
      functionName: functionName as "challengeWindow",
      args: args as [],
    }) as Promise<T>;

  // With the viewer key, the credit is decrypted here, never taken from the service.
  let viewer: SlotViewer | undefined;
  const viewerKey =
    process.env["CONFIDENTIAL_CHECK_VIEWER_KEY_FILE"] ??
    process.env["CONFIDENTIAL_CHECK_VIEWER_KEY"];
  if (viewerKey?.trim()) {
    // The process exits when the check ends, closing the fhEVM client with it.
    const fhe = await viewerFhe(await client.getChainId(), rpcUrl);
    viewer = await slotViewer({
      client,
      fhe,
      vault,
      slot,
      viewer: privateKeyToAccount(setting("CONFIDENTIAL_CHECK_VIEWER_KEY") as Hex),
    });
  }

  const res = await fetch(`${base}/confidential/days`, {
    headers: { "X-API-Key": setting("CONFIDENTIAL_CHECK_API_KEY") },
  });
  if (!res.ok)
    throw new Error(`GET /confidential/days answered ${res.status}: ${await res.text()}`);
  const reported = ((await res.json()) as { days?: DayCheck[] }).days ?? [];
  const reportedByDay = new Map(reported.map((d) => [dayOf(d.day), d]));

  // Every receipt this check may count: its own store first, then the service's.
  const candidates = new Map<string, ConfidentialReceipt>();
  const own = storeFile ? new ReceiptStore(storeFile).all() : [];
  for (const r of own) candidates.set(r.key.toLowerCase(), r);
  for (const d of reported) {
    for (const raw of Array.isArray(d.unpresented) ? d.unpresented : []) {
      const r = receiptIn({ extensions: { confidential: raw } });
      if (r && !candidates.has(r.key.toLowerCase())) candidates.set(r.key.toLowerCase(), r);
    }
  }
  const good = new Map<number, ConfidentialReceipt[]>();
  for (const r of candidates.values()) {
    const problem = await checkReceipt(r, { vault, slot }, readPayment);
    if (problem) {
      process.stdout.write(`receipt ${r.key} left out: ${problem}\n`);
      continue;
    }
    const { state } = await readPayment(r.key);
    if (state !== 1) continue; // redeemed or returned: not in the day's pool
    good.set(r.day, [...(good.get(r.day) ?? []), r]);
  }

  const [window, block] = await Promise.all([read<bigint>("challengeWindow"), client.getBlock()]);
  const days = new Set([...reportedByDay.keys(), ...good.keys()]);
  const short: { day: number; receipts: ConfidentialReceipt[] }[] = [];
  for (const day of [...days].sort((a, b) => a - b)) {
    const [info, [closedAt]] = await Promise.all([
      read<readonly unknown[]>("dayInfo", [BigInt(day)]),
      read<readonly [bigint, bigint, bigint]>("dayChallenges", [BigInt(day)]),
    ]);
    const phase = Number(info[7]);
    const inWindow = phase === 2 && block.timestamp < closedAt + window;
    if (!inWindow && phase !== 3) continue;
    const receipts = good.get(day) ?? [];
    const total = receipts.reduce((t, r) => t + BigInt(r.amount), 0n);
    const d = reportedByDay.get(day);
    const said =
      d && typeof d.credit === "string" && /^\d+$/.test(d.credit) ? BigInt(d.credit) : null;
    const credit = viewer ? await viewer.credit(day) : said;
    const verdict = !d
      ? "UNREPORTED (treated as short)"
      : phase === 3
        ? "disputed"
        : credit === null || credit < total
          ? "SHORT"
          : "ok";
    process.stdout.write(
      `${dateOf(day)}  ${phase === 3 ? "disputed" : "closed  "}  credit ${usdc(credit).padStart(14)}  receipts ${String(receipts.length).padStart(4)} = ${usdc(total).padStart(14)}  ${verdict}${inWindow ? `  (challengeable until ${new Date(Number(closedAt + window) * 1000).toISOString()})` : ""}${viewer && d && said !== credit ? `  (decrypted with the viewer key; the service said ${usdc(said)})` : ""}\n`,
    );
    if (verdict === "ok") continue;
    const unpresented = [];
    for (const r of receipts) {
      const presented = await read<boolean>("presented", [r.key]);
      if (!presented) unpresented.push(r);
    }
    short.push({ day, receipts: unpresented });
  }
  if (short.length === 0) {
    if (days.size === 0)
      process.stdout.write("no day of your receipts is in its challenge window\n");
    return 0;
  }
  if (!sendChallenges) {
    process.stdout.write("run again with --challenge to present the short days' receipts\n");
    return 2;
  }
  const account = privateKeyToAccount(setting("CONFIDENTIAL_CHECK_WALLET_KEY") as Hex);
  const chain = defineChain({
    id: await client.getChainId(),
    name: "vault chain",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const wallet = createWalletClient({ chain, transport: http(rpcUrl), account });
  for (const { day, receipts } of short) {
    if (receipts.length === 0) continue; // every receipt of it was presented already
    // Built here, to the configured vault: `challenge` and nothing else.
    const call = challengeCall(vault as Address, receipts);
    process.stdout.write(
      `${dateOf(day)}: presenting ${receipts.length} receipts from ${account.address}…\n`,
    );
    const hash = await wallet.sendTransaction({ to: call.to, data: call.data });
    const receipt = await client.waitForTransactionReceipt({ hash });
    process.stdout.write(
      `${dateOf(day)}: challenge ${receipt.status} in ${hash} (${receipt.gasUsed} gas)\n`,
    );
    if (receipt.status !== "success") throw new Error(`the challenge of ${dateOf(day)} reverted`);
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
