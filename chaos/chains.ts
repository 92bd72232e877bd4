/**
 * The chains of a chaos run, one entry per family: the devnet's ledgers
 * (reused from `devnet/` and the family suites' adapters in
 * `test/families/`), each behind its faulty RPC proxy, with what the
 * service processes are given to serve it, how the traffic pays on it, and
 * how the checks read it: the payTo's balance, a success's transfer on the
 * canonical chain, and every transaction our signers sent.
 */
import {
  createPublicClient,
  decodeEventLog,
  erc20Abi,
  getAddress,
  http,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { PaymentPayload } from "@x402/core/types";
import { startDevnet, type Devnet } from "../devnet/index.js";
import type { FamilyAdapter } from "../test/families/adapter.js";
import { evm } from "../test/families/evm.js";
import { near } from "../test/families/near.js";
import { solana } from "../test/families/solana.js";
import { starknet } from "../test/families/starknet.js";
import { xrpl } from "../test/families/xrpl.js";
import { startSolanaLedger } from "../devnet/svm/index.js";
import { startNearLedger } from "../devnet/near/index.js";
import { startXrplLedger } from "../devnet/xrpl/index.js";
import { startStarknetLedger } from "../devnet/starknet/index.js";
import { requirementsFor, signedBy } from "../test/families/signing.js";
import type { TestStack } from "../test/support/stack.js";
import { signPayment } from "../test/support/payments.js";
import { startFaultyRpc, type FaultyRpc } from "./faultyRpc.js";
import type { PaymentRecord, TrafficFamily } from "./traffic.js";

/** What the checks read of one chain. */
export interface ChainAudit {
  name: string;
  network: string;
  payTo: string;
  /** The payTo's balance when the run began (an XRPL account holds its reserve). */
  payToStart: bigint;
  payToBalance(): Promise<bigint>;
  /**
   * Why `transaction` is not exactly one transfer of `payment` on the
   * canonical chain, or undefined when it is.
   */
  transferProblem(transaction: string, payment: PaymentRecord): Promise<string | undefined>;
  /** Whether the chain holds `transaction` (mined, on the canonical chain). */
  holds(transaction: string): Promise<boolean>;
  /** Every transaction our signers sent since the run began (where the family has signers). */
  signerTransactions?(): Promise<string[]>;
}

export interface ChaosChain {
  name: string;
  rpc: FaultyRpc;
  /** Environment the service processes are given for this family. */
  env: Record<string, string>;
  traffic: TrafficFamily;
  audit: ChainAudit;
  /** EVM only: the node, for anvil's own fault methods. */
  anvil?: { rpcUrl: string; signerKeys: Hex[] };
  stop(): Promise<void>;
}

/**
 * A family's traffic from its suite adapter: requirements as a resource
 * server builds them from the service's /supported, payments as the
 * payer's official client signs them.
 */
function adapterTraffic(
  adapter: FamilyAdapter,
  stack: () => TestStack,
  payers: number,
): TrafficFamily {
  return {
    name: adapter.name,
    network: adapter.network,
    payers,
    requirements: (amount) => requirementsFor(stack(), adapter, amount),
    async pay(i, amount) {
      const requirements = await requirementsFor(stack(), adapter, amount);
      const payload = await signedBy(stack(), adapter, i, requirements);
      return { payload, requirements, payer: await adapter.payer(stack(), i) };
    },
  };
}

/**
 * The chains' stack as the suite adapters read it. The chaos run has no
 * in-process service, so `service` is absent: the adapters never read it.
 */
export interface StackParts {
  url: string;
  apiKey: string;
}

export async function startEvmChain(parts: () => StackParts): Promise<ChaosChain> {
  const devnet: Devnet = await startDevnet({
    networks: ["eip155:8453"],
    blockTimeSeconds: 1,
    outFile: null,
    payers: 5,
    facilitators: 4,
  });
  const info = devnet.networks["eip155:8453"]!;
  const rpc = await startFaultyRpc("eip155:8453", info.rpcUrl);
  const client: PublicClient = createPublicClient({ transport: http(info.rpcUrl) });
  const fromBlock = (await client.getBlockNumber()) + 1n;
  const usdc = info.assets["USDC"] as Hex;
  const signerKeys = info.facilitatorPrivateKeys as Hex[];
  const signers = new Set(signerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase()));
  const stack = (): TestStack =>
    ({
      ...parts(),
      devnet,
      network: "eip155:8453",
      rpcUrl: info.rpcUrl,
      usdc,
      assets: info.assets,
      payerKeys: info.payerPrivateKeys,
    }) as unknown as TestStack;
  const payTo = evm.payTo(stack());
  const traffic: TrafficFamily = {
    ...adapterTraffic(evm, stack, 4),
    async unfunded(amount) {
      const requirements = await requirementsFor(stack(), evm, amount);
      const key = generatePrivateKey();
      const payload: PaymentPayload = await signPayment(key, requirements);
      return { payload, requirements, payer: privateKeyToAccount(key).address };
    },
  };
  return {
    name: "EVM",
    rpc,
    env: {
      EVM_RPC_URLS_8453: rpc.url,
      EVM_PRIVATE_KEYS: signerKeys.join(","),
      EVM_BLOCK_TIME_MS_8453: "1000",
    },
    traffic,
    anvil: { rpcUrl: info.rpcUrl, signerKeys },
    audit: {
      name: "EVM",
      network: "eip155:8453",
      payTo,
      payToStart: await evm.balanceOf(stack(), payTo),
      payToBalance: () => evm.balanceOf(stack(), payTo),
      async holds(transaction) {
        const receipt = await client
          .getTransactionReceipt({ hash: transaction as Hex })
          .catch(() => undefined);
        if (!receipt) return false;
        const block = await client.getBlock({ blockNumber: receipt.blockNumber });
        return block.hash === receipt.blockHash;
      },
      async transferProblem(transaction, payment) {
        const receipt = await client
          .getTransactionReceipt({ hash: transaction as Hex })
          .catch(() => undefined);
        if (!receipt) return "no receipt on the canonical chain";
        if (receipt.status !== "success") return "the transaction reverted";
        const block = await client.getBlock({ blockNumber: receipt.blockNumber });
        if (block.hash !== receipt.blockHash) return "its block is not canonical";
        const transfers = receipt.logs.flatMap((log) => {
          if (log.address.toLowerCase() !== payment.asset.toLowerCase()) return [];
          try {
            const ev = decodeEventLog({ abi: erc20Abi, data: log.data, topics: log.topics });
            return ev.eventName === "Transfer" ? [ev.args] : [];
          } catch {
            return [];
          }
        });
        const matching = transfers.filter(
          (t) =>
            getAddress(t.to) === getAddress(payment.payTo) &&
            getAddress(t.from) === getAddress(payment.payer) &&
            t.value === payment.amount,
        );
        if (matching.length !== 1) {
          return `${matching.length} matching transfers (of ${transfers.length}) to ${payment.payTo} of ${payment.amount}`;
        }
        return undefined;
      },
      async signerTransactions() {
        const head = await client.getBlockNumber();
        const sent: string[] = [];
        for (let n = fromBlock; n <= head; n++) {
          const block = await client.getBlock({ blockNumber: n, includeTransactions: true });
          for (const tx of block.transactions) {
            if (signers.has(tx.from.toLowerCase())) sent.push(tx.hash);
          }
        }
        return sent;
      },
    },
    stop: async () => {
      await rpc.close();
      await devnet.stop();
    },
  };
}

/**
 * The loopback ledgers of the other families (Solana on LiteSVM; NEAR, XRPL
 * and Starknet executing for real in-process), each behind its faulty
 * proxy. Their checks read the ledger itself: a success's transaction must
 * be one it holds, and the payTo's balance the sum of the successes (their
 * suites check a transfer's detail; here the sum does).
 */
export async function startLedgerChains(parts: () => StackParts): Promise<ChaosChain[]> {
  const [sol, nearLedger, xrplLedger, stark] = await Promise.all([
    startSolanaLedger({ slotMs: 200 }),
    startNearLedger({ blockMs: 500 }),
    startXrplLedger({ closeMs: 1000 }),
    startStarknetLedger({ blockMs: 500 }),
  ]);
  const stack = (): TestStack =>
    ({
      ...parts(),
      solana: sol,
      near: nearLedger,
      xrpl: xrplLedger,
      starknet: stark,
    }) as unknown as TestStack;
  const proxies = await Promise.all([
    startFaultyRpc(solana.network, sol.info.rpcUrl),
    startFaultyRpc(near.network, nearLedger.info.rpcUrl),
    startFaultyRpc(xrpl.network, xrplLedger.info.rpcUrl),
    startFaultyRpc(starknet.network, stark.info.rpcUrl),
  ]);
  const chain = async (
    name: string,
    adapter: FamilyAdapter,
    rpc: FaultyRpc,
    env: Record<string, string>,
    payers: number,
    holds: (reference: string) => boolean,
    stopLedger: () => Promise<unknown>,
  ): Promise<ChaosChain> => {
    const payTo = adapter.payTo(stack());
    return {
      name,
      rpc,
      env,
      traffic: { ...adapterTraffic(adapter, stack, payers), name },
      audit: {
        name,
        network: adapter.network,
        payTo,
        payToStart: await adapter.balanceOf(stack(), payTo),
        payToBalance: () => adapter.balanceOf(stack(), payTo),
        holds: async (reference) => holds(reference),
        transferProblem: async (reference) =>
          holds(reference) ? undefined : "the ledger does not hold this transaction",
      },
      stop: async () => {
        await rpc.close();
        await stopLedger();
      },
    };
  };
  return Promise.all([
    chain(
      "Solana",
      solana,
      proxies[0]!,
      { SVM_RPC_URL: proxies[0]!.url, SVM_PRIVATE_KEYS: sol.info.facilitatorSecretKeys.join(",") },
      4,
      (ref) => sol.ledger.transaction(ref) !== undefined,
      () => sol.stop(),
    ),
    chain(
      "NEAR",
      near,
      proxies[1]!,
      {
        NEAR_RPC_URL: proxies[1]!.url,
        NEAR_RELAYER_KEYS: nearLedger.info.relayers
          .map((r) => `${r.accountId}:${r.secretKey}`)
          .join(","),
      },
      3,
      (ref) => nearLedger.ledger.transaction(ref) !== undefined,
      () => nearLedger.stop(),
    ),
    chain(
      "XRPL",
      xrpl,
      proxies[2]!,
      { XRPL_RPC_URL: proxies[2]!.url },
      3,
      (ref) => xrplLedger.ledger.transaction(ref) !== undefined,
      () => xrplLedger.stop(),
    ),
    chain(
      "Starknet",
      starknet,
      proxies[3]!,
      {
        STARKNET_RPC_URL: proxies[3]!.url,
        STARKNET_EXECUTOR_KEYS: stark.executors
          .map((e) => `${e.address}:${e.privateKey}`)
          .join(","),
      },
      3,
      (ref) => stark.ledger.transaction(ref) !== undefined,
      () => stark.stop(),
    ),
  ]);
}
