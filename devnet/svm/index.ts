/**
 * The local Solana network of the devnet: a `SolanaLedger` with USDC, funded
 * payers and fee payers, served as Solana JSON-RPC on loopback.
 *
 * `startSolanaLedger` runs it in this process (tests); `startSolanaDevnet`
 * runs it in a process of its own, as anvil runs, and resolves once it
 * answers (devnet mode and `npm run devnet`).
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { getBase58Decoder } from "@solana/kit";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { SolanaLedger } from "./ledger.js";
import { serveSolanaRpc, solanaRpcHandlers } from "./rpcServer.js";
import {
  devnetSolanaFeePayers,
  devnetSolanaMintAuthority,
  devnetSolanaPayTo,
  devnetSolanaPayers,
} from "./keys.js";
import { USDC_MINT, createMint, createTokenAccount } from "./setup.js";

export { SOLANA_MAINNET, USDC_MINT, associatedTokenAccount, writeTokenAccount } from "./setup.js";

export interface SolanaDevnetOptions {
  /** Milliseconds per slot (400, as mainnet). */
  slotMs?: number;
  payers?: number;
  feePayers?: number;
  /** USDC (atomic units) in each payer's token account. Default 1,000,000 USDC. */
  payerUsdc?: bigint;
  port?: number;
}

/** What `.devnet/devnet.json` holds under `networks["solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"]`. */
interface SolanaNetworkInfo {
  rpcUrl: string;
  assets: { USDC: string };
  /** Base58 64-byte secret keys of funded payers (devnet only). */
  payerSecretKeys: string[];
  /** Base58 64-byte secret keys of the facilitator's fee payers (devnet only). */
  facilitatorSecretKeys: string[];
  /** An address with a USDC token account, for example resource servers. */
  payTo: string;
}

export interface RunningSolana {
  info: SolanaNetworkInfo;
  stop(): Promise<void>;
}

export async function startSolanaLedger(
  opts: SolanaDevnetOptions = {},
): Promise<RunningSolana & { ledger: SolanaLedger }> {
  const ledger = new SolanaLedger();
  const [payers, feePayers, payTo, authority] = await Promise.all([
    devnetSolanaPayers(opts.payers ?? 5),
    devnetSolanaFeePayers(opts.feePayers ?? 2),
    devnetSolanaPayTo(),
    devnetSolanaMintAuthority(),
  ]);
  const perPayer = opts.payerUsdc ?? 1_000_000_000_000n;
  createMint(ledger, USDC_MINT, authority.signer.address, perPayer * BigInt(payers.length));
  for (const p of payers) {
    await createTokenAccount(ledger, p.signer.address, perPayer);
    // A little SOL so a payer can also pay its own fees outside x402.
    ledger.airdrop(p.signer.address, 1_000_000_000n);
  }
  await createTokenAccount(ledger, payTo.signer.address, 0n);
  for (const f of feePayers) ledger.airdrop(f.signer.address, 100_000_000_000n);
  ledger.start(opts.slotMs ?? 400);
  // A fresh ledger is a new chain: a genesis of its own, so the service does
  // not reconcile records from an earlier run against it.
  const genesis = getBase58Decoder().decode(randomBytes(32));
  const rpc = await serveSolanaRpc(solanaRpcHandlers(ledger, genesis), opts.port ?? 0);
  return {
    ledger,
    info: {
      rpcUrl: rpc.url,
      assets: { USDC: USDC_MINT },
      payerSecretKeys: payers.map((p) => p.secretKey),
      facilitatorSecretKeys: feePayers.map((f) => f.secretKey),
      payTo: payTo.signer.address,
    },
    async stop() {
      ledger.stop();
      await rpc.close();
    },
  };
}

/** Runs the ledger in its own process (main.ts); resolves with its description once it serves. */
export async function startSolanaDevnet(opts: SolanaDevnetOptions = {}): Promise<RunningSolana> {
  const here = import.meta.url;
  const entry = fileURLToPath(new URL(here.endsWith(".ts") ? "./main.ts" : "./main.js", here));
  const args = [
    ...(entry.endsWith(".ts") ? ["--import", "tsx"] : []),
    entry,
    JSON.stringify(opts, (_k, v) => (typeof v === "bigint" ? v.toString() : v)),
  ];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const info = await new Promise<SolanaNetworkInfo>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", (line) => {
      try {
        const { ready, ...parsed } = JSON.parse(line) as { ready: boolean } & SolanaNetworkInfo;
        if (!ready) throw new Error(line);
        // The child's "ready" is its handshake, not part of the network's description.
        resolve(parsed);
      } catch (e) {
        reject(new Error(`the Solana devnet did not start: ${String(e)}`));
      }
    });
    child.once("exit", (code) =>
      reject(new Error(`the Solana devnet exited (${code}) before it served`)),
    );
  });
  // A devnet never outlives the process that started it.
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  return {
    info,
    async stop() {
      process.off("exit", kill);
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
