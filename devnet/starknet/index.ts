/**
 * The local Starknet of the devnet: a `StarknetLedger` with USDC and STRK at
 * their mainnet addresses, funded payer accounts (USDC), executor accounts
 * for the facilitator (STRK for fees) and a payTo account, served on
 * loopback as Starknet JSON-RPC. Cheap enough to run inside the calling
 * process.
 *
 * Keys are derived from fixed labels: the same accounts every run, public
 * test keys (devnet only, never real ones).
 */
import { createHash } from "node:crypto";
import { ec } from "starknet";
import {
  STARKNET_MAINNET_ID,
  STARKNET_STRK,
  STARKNET_USDC,
  findStarknetNetwork,
} from "../../src/chains/starknet/networks.js";
import { StarknetLedger } from "./ledger.js";
import { serveStarknet } from "./rpcServer.js";

export const STARKNET_MAINNET = STARKNET_MAINNET_ID;

export interface StarknetKeyPair {
  address: string;
  privateKey: string;
}

/** What `.devnet/devnet.json` holds under `networks["starknet:SN_MAIN"]`. */
interface StarknetNetworkInfo {
  rpcUrl: string;
  chainId: string;
  assets: { USDC: string };
  feeToken: { STRK: string };
  /** Funded payer accounts (devnet only). */
  payers: StarknetKeyPair[];
  /** The facilitator's executor accounts (addresses; their keys stay with the process). */
  executors: string[];
  /** An account that receives payments, for example resource servers. */
  payTo: string;
}

export interface RunningStarknet {
  info: StarknetNetworkInfo;
  ledger: StarknetLedger;
  /** The executor accounts with their keys, for the service (devnet only). */
  executors: StarknetKeyPair[];
  stop(): Promise<void>;
}

export interface StarknetDevnetOptions {
  /** Milliseconds per block (1000 by default; mainnet takes a few seconds). */
  blockMs?: number;
  payers?: number;
  executors?: number;
  /** USDC (atomic units) each payer holds. Default 10,000 USDC. */
  payerUsdc?: bigint;
  /** STRK (FRI) each executor holds. Default 1,000 STRK. */
  executorStrk?: bigint;
  port?: number;
}

/** A devnet Stark private key from a fixed label: the same key every run (devnet only). */
function devnetStarknetKey(label: string): string {
  const digest = BigInt(
    "0x" + createHash("sha256").update(`x402 devnet starknet ${label}`).digest("hex"),
  );
  return `0x${((digest % (ec.starkCurve.CURVE.n - 1n)) + 1n).toString(16)}`;
}

export function devnetStarknetAccount(label: string): StarknetKeyPair {
  const privateKey = devnetStarknetKey(label);
  return { address: StarknetLedger.accountAddress(privateKey), privateKey };
}

export async function startStarknetLedger(
  opts: StarknetDevnetOptions = {},
): Promise<RunningStarknet> {
  const network = findStarknetNetwork(STARKNET_MAINNET)!;
  const ledger = new StarknetLedger({ chainId: network.chainId, feeToken: STARKNET_STRK });
  ledger.deployToken(STARKNET_USDC, "USDC", 6);
  ledger.deployToken(STARKNET_STRK, "STRK", 18);
  const deploy = (label: string): StarknetKeyPair => {
    const pair = devnetStarknetAccount(label);
    ledger.deployAccount(pair.privateKey);
    return pair;
  };
  const payTo = deploy("payTo");
  const payers = Array.from({ length: opts.payers ?? 5 }, (_, i) => deploy(`payer ${i}`));
  for (const p of payers) ledger.mint(STARKNET_USDC, p.address, opts.payerUsdc ?? 10_000_000_000n);
  const executors = Array.from({ length: opts.executors ?? 2 }, (_, i) => deploy(`executor ${i}`));
  for (const e of executors) {
    ledger.mint(STARKNET_STRK, e.address, opts.executorStrk ?? 1_000n * 10n ** 18n);
  }
  ledger.produceBlock();
  ledger.start(opts.blockMs ?? 1000);
  const served = await serveStarknet(ledger, opts.port ?? 0);
  return {
    ledger,
    executors,
    info: {
      rpcUrl: served.rpcUrl,
      chainId: network.chainId,
      assets: { USDC: STARKNET_USDC },
      feeToken: { STRK: STARKNET_STRK },
      payers,
      executors: executors.map((e) => e.address),
      payTo: payTo.address,
    },
    async stop() {
      ledger.stop();
      await served.close();
    },
  };
}
