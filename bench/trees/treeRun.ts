/**
 * One tree's service as `npm start` runs it (devnet mode, embedded
 * database, one EVM network, 1 s blocks), loaded with distinct EVM
 * settles in a closed loop, then its chain's own ceiling: plain transfers
 * from the same signers at the same concurrency, on the same chain, with
 * the service idle.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { PaymentRequirements } from "@x402/core/types";
import {
  createPublicClient,
  createWalletClient,
  erc20Abi,
  http,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { classifySettle, freePort, stopServers } from "../harness.js";
import { percentile, runLoad } from "../load.js";
import { settledPerSecond } from "../sideBySide.js";
import { chainCeiling } from "../chainCeiling.js";

const NETWORK = "eip155:8453";
const PRICE = 1_000n;

export interface TreeFigures {
  settledPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** Settles answered `success: true`. */
  settled: number;
  /** What `payTo` received, over what the successes promised (1: each landed once). */
  paidOverPromised: number;
  /** Plain transfers the chain included a second, from the same signers. */
  ceilingPerSecond: number;
  outcomes: string;
}

interface DevnetFile {
  facilitatorUrl: string;
  apiKey: string;
  networks: Record<
    string,
    {
      rpcUrl: string;
      assets: Record<string, string>;
      payerPrivateKeys: Hex[];
      facilitatorPrivateKeys: Hex[];
    }
  >;
}

/** Only what a user's shell would hand `npm start`: none of this process's settings. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const keep = ["PATH", "HOME", "TMPDIR", "LANG"];
  const env: NodeJS.ProcessEnv = {};
  for (const k of keep) if (process.env[k] !== undefined) env[k] = process.env[k];
  return { ...env, ...extra };
}

async function started(file: string, child: ChildProcess, ms = 180_000): Promise<DevnetFile> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (child.exitCode !== null)
      throw new Error(`the service exited (${child.exitCode}) while starting`);
    if (existsSync(file)) {
      const devnet = JSON.parse(readFileSync(file, "utf8")) as DevnetFile;
      const ok = await fetch(`${devnet.facilitatorUrl}/supported`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return devnet;
    }
    await sleep(250);
  }
  throw new Error("the service did not start within 3 minutes");
}

/** Signs `n` distinct payments to `payTo` with the official client, round robin over the payers. */
async function signPayments(keys: Hex[], requirements: PaymentRequirements, n: number) {
  const schemes = keys.map((k) => new ExactEvmScheme(privateKeyToAccount(k)));
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const partial = await schemes[i % schemes.length]!.createPaymentPayload(2, requirements);
    out.push(
      JSON.stringify({
        x402Version: 2,
        paymentPayload: { x402Version: 2, accepted: requirements, payload: partial.payload },
        paymentRequirements: requirements,
      }),
    );
  }
  return out;
}

/** `count` fresh payers, each sent `amount` of USDC by the devnet's funded payers. */
async function fundPayers(
  client: PublicClient,
  rpcUrl: string,
  usdc: Hex,
  funderKeys: Hex[],
  count: number,
  amount: bigint,
): Promise<Hex[]> {
  const keys = Array.from({ length: count }, () => generatePrivateKey());
  const funders = await Promise.all(
    funderKeys.map(async (k) => {
      const account = privateKeyToAccount(k);
      return {
        wallet: createWalletClient({ account, transport: http(rpcUrl) }),
        nonce: await client.getTransactionCount({ address: account.address, blockTag: "pending" }),
      };
    }),
  );
  const hashes = await Promise.all(
    keys.map((key, i) => {
      const funder = funders[i % funders.length]!;
      return funder.wallet.writeContract({
        chain: null,
        address: usdc,
        abi: erc20Abi,
        functionName: "transfer",
        args: [privateKeyToAccount(key).address, amount],
        nonce: funder.nonce++,
        gas: 100_000n,
      });
    }),
  );
  for (const hash of hashes) {
    const receipt = await client.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`funding a payer reverted (${hash})`);
  }
  return keys;
}

/** Runs the tree at `dir` and measures it; the service and its devnet are stopped after. */
export async function measureTree(
  dir: string,
  opts: {
    settles: number;
    concurrency: number;
    ceilingTransfers: number;
    say: (l: string) => void;
  },
): Promise<TreeFigures> {
  const data = mkdtempSync(join(tmpdir(), "bench-tree-"));
  const file = join(data, "devnet.json");
  const child = spawn(process.execPath, ["scripts/start.mjs"], {
    cwd: dir,
    env: cleanEnv({
      PORT: String(await freePort()),
      HOST: "127.0.0.1",
      DATA_DIR: join(data, "data"),
      DEVNET_FILE: file,
      DEVNET_NETWORKS: NETWORK,
      LOG_LEVEL: "error",
    }),
    stdio: ["ignore", "ignore", "inherit"],
  });
  try {
    const devnet = await started(file, child);
    const chain = devnet.networks[NETWORK]!;
    const usdc = (chain.assets["USDC"] ?? Object.values(chain.assets)[0]) as Hex;
    // The first devnet payer is paid; the others fund the customers.
    const payTo = privateKeyToAccount(chain.payerPrivateKeys[0]!).address;
    const requirements: PaymentRequirements = {
      scheme: "exact",
      network: NETWORK,
      asset: usdc,
      amount: PRICE.toString(),
      payTo,
      maxTimeoutSeconds: 3600,
      extra: { name: "USD Coin", version: "2" },
    };
    const client = createPublicClient({ transport: http(chain.rpcUrl) });
    // As many customers as settles in flight, each funded for its share:
    // a merchant's load comes from many payers, and one payer's settles
    // wait for each other (one settle in flight per payer), which would
    // otherwise be what this measures.
    opts.say(`  funding ${opts.concurrency} payers…`);
    const payers = await fundPayers(
      client,
      chain.rpcUrl,
      usdc,
      chain.payerPrivateKeys.slice(1),
      opts.concurrency,
      PRICE * BigInt(Math.ceil(opts.settles / opts.concurrency)),
    );
    opts.say(`  signing ${opts.settles} payments…`);
    const bodies = await signPayments(payers, requirements, opts.settles);
    const balance = () =>
      client.readContract({
        address: usdc,
        abi: erc20Abi,
        functionName: "balanceOf",
        args: [payTo],
      });
    const before = await balance();
    opts.say(`  ${opts.settles} settles at concurrency ${opts.concurrency}…`);
    const load = await runLoad({
      url: `${devnet.facilitatorUrl}/settle`,
      headers: { "x-api-key": devnet.apiKey },
      concurrency: opts.concurrency,
      bodies,
      capMs: 600_000,
      classify: classifySettle,
    });
    const settled = load.outcomes.get("settled") ?? 0;
    const paid = (await balance()) - before;
    const sorted = [...load.latenciesMs].sort((a, b) => a - b);
    const figures = {
      settledPerSecond: settledPerSecond(load),
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      settled,
      paidOverPromised: settled === 0 ? 0 : Number(paid) / Number(PRICE * BigInt(settled)),
      outcomes: [...load.outcomes].map(([k, v]) => `${k} ${v}`).join(", "),
    };
    // On the same chain, once the service is idle: its signers' keys send
    // plain transfers (the service's own view of their nonces goes stale,
    // but it is asked nothing more).
    opts.say(`  the chain's ceiling: ${opts.ceilingTransfers} plain transfers…`);
    const ceilingPerSecond = await chainCeiling(
      chain.rpcUrl,
      usdc,
      chain.facilitatorPrivateKeys,
      opts.ceilingTransfers,
      opts.concurrency,
    );
    return { ...figures, ceilingPerSecond };
  } finally {
    // Stopping the service stops its devnet chain too.
    await stopServers([child]);
    rmSync(data, { recursive: true, force: true });
  }
}
