/**
 * The chaos run's faults, one at a time on a seeded schedule across the
 * run (the last part of the run is left quiet, so what the faults left
 * behind can settle before the checks): a replica killed with SIGKILL in
 * the middle of settles and started again, the other one stopped with
 * SIGTERM and started again, an RPC proxy that delays, errs, blackholes or
 * loses answers, a PostgreSQL restart, Redis down for a while, a pending
 * transaction dropped from anvil's pool, a short reorg on anvil, and a
 * signer's nonce moved by a transaction sent outside the service.
 */
import { createWalletClient, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { ChaosChain } from "./chains.js";
import type { RpcFaultMode } from "./faultyRpc.js";
import type { History } from "./history.js";
import type { Replica } from "./replicas.js";
import type { ChaosPostgres, ChaosRedis } from "./servers.js";

export const FAULT_KINDS = [
  "sigkill-replica",
  "sigterm-replica",
  "rpc-delay",
  "rpc-error",
  "rpc-blackhole",
  "rpc-drop",
  "postgres-restart",
  "redis-down",
  "anvil-drop-tx",
  "anvil-reorg",
  "nonce-moved",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultContext {
  replicas: readonly Replica[];
  chains: readonly ChaosChain[];
  postgres: ChaosPostgres;
  redis: ChaosRedis;
  history: History;
  random: () => number;
  /** Settles in flight right now (a kill waits for some, to land mid-settle). */
  busy: () => number;
  /** Transactions the run itself sent from a signer account, outside the service. */
  outsideSends: Set<string>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function anvilCall(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const json = (await res.json()) as { result?: unknown; error?: { message: string } };
  if (json.error) throw new Error(`${method}: ${json.error.message}`);
  return json.result;
}

/**
 * The faults for a run of `ms`, in seeded order: every kind at least once
 * when there is time, then more picked at random, spread over the first
 * 70% of the run.
 */
export function faultSchedule(
  ms: number,
  random: () => number,
  kinds: readonly FaultKind[],
): { at: number; kind: FaultKind }[] {
  const window = ms * 0.7;
  const slots = Math.max(kinds.length, Math.floor(window / 12_000));
  const order = [...kinds];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  while (order.length < slots) order.push(kinds[Math.floor(random() * kinds.length)]!);
  const step = window / order.length;
  return order.map((kind, i) => ({ at: Math.round(step * (i + 0.2 + random() * 0.5)), kind }));
}

export async function injectFault(kind: FaultKind, ctx: FaultContext): Promise<void> {
  const { history, random } = ctx;
  const note = (detail: string) => history.record({ type: "fault", fault: kind, detail });
  const evm = ctx.chains.find((c) => c.anvil);
  switch (kind) {
    case "sigkill-replica": {
      const replica = ctx.replicas[0]!;
      // Wait (a little) for settles in flight, so the kill lands mid-settle.
      for (let i = 0; i < 40 && ctx.busy() === 0; i++) await sleep(50);
      await replica.stop("SIGKILL");
      note(`${replica.name} killed with ${ctx.busy()} requests in flight`);
      await sleep(1_000 + random() * 2_000);
      await replica.start();
      note(`${replica.name} started again`);
      return;
    }
    case "sigterm-replica": {
      const replica = ctx.replicas[1]!;
      const code = await replica.stop("SIGTERM");
      note(`${replica.name} stopped by SIGTERM, exit ${code}`);
      await replica.start();
      note(`${replica.name} started again`);
      return;
    }
    case "rpc-delay":
    case "rpc-error":
    case "rpc-blackhole":
    case "rpc-drop": {
      const chain = ctx.chains[Math.floor(random() * ctx.chains.length)]!;
      const mode = kind.slice(4) as RpcFaultMode;
      const ms = Math.round(3_000 + random() * 5_000);
      chain.rpc.mode = mode;
      note(`${chain.name} RPC: ${mode} for ${ms} ms`);
      await sleep(ms);
      chain.rpc.mode = "pass";
      return;
    }
    case "postgres-restart": {
      const ms = Math.round(1_000 + random() * 2_000);
      await ctx.postgres.restart(ms);
      note(`PostgreSQL stopped, down ${ms} ms, started again`);
      return;
    }
    case "redis-down": {
      const ms = Math.round(4_000 + random() * 6_000);
      note(`Redis down for ${ms} ms`);
      await ctx.redis.outage(ms);
      return;
    }
    case "anvil-drop-tx": {
      if (!evm?.anvil) return note("no EVM chain");
      const signers = new Set(
        evm.anvil.signerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase()),
      );
      // A settlement transaction waits up to a block (1 s) in the pool: catch one.
      for (let i = 0; i < 100; i++) {
        const pool = (await anvilCall(evm.anvil.rpcUrl, "txpool_content", [])) as {
          pending: Record<string, Record<string, { hash: string }>>;
        };
        const ours = Object.entries(pool.pending).find(([from]) => signers.has(from.toLowerCase()));
        const tx = ours && Object.values(ours[1])[0];
        if (tx) {
          await anvilCall(evm.anvil.rpcUrl, "anvil_dropTransaction", [tx.hash]);
          history.record({ type: "chain", chain: evm.name, event: "dropped", detail: tx.hash });
          return note(`dropped ${tx.hash} from anvil's pool`);
        }
        await sleep(100);
      }
      return note("no pending settlement transaction to drop");
    }
    case "anvil-reorg": {
      if (!evm?.anvil) return note("no EVM chain");
      const depth = 1 + Math.floor(random() * 3);
      const head = (await anvilCall(evm.anvil.rpcUrl, "eth_blockNumber", [])) as string;
      await anvilCall(evm.anvil.rpcUrl, "anvil_reorg", [depth, []]);
      history.record({
        type: "chain",
        chain: evm.name,
        event: "reorg",
        detail: `depth ${depth} at ${Number(head)}`,
      });
      return note(`reorged the last ${depth} blocks below ${Number(head)}`);
    }
    case "nonce-moved": {
      if (!evm?.anvil) return note("no EVM chain");
      const key = evm.anvil.signerKeys[Math.floor(random() * evm.anvil.signerKeys.length)]!;
      const account = privateKeyToAccount(key);
      const wallet = createWalletClient({ account, transport: http(evm.anvil.rpcUrl) });
      const hash: Hex = await wallet.sendTransaction({
        to: account.address,
        value: 0n,
        chain: null,
      });
      ctx.outsideSends.add(hash.toLowerCase());
      history.record({ type: "chain", chain: evm.name, event: "outside-send", detail: hash });
      return note(`sent ${hash} from signer ${account.address} outside the service`);
    }
  }
}
