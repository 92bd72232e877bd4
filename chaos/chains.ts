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
  createWalletClient,
  decodeEventLog,
  erc20Abi,
  getAddress,
  http,
  maxUint256,
  type Hex,
  type PublicClient,
} from "viem";
import { x402Client } from "@x402/core/client";
import { x402ResourceServer } from "@x402/core/server";
import { PERMIT2_ADDRESS } from "@x402/evm";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { facilitatorClient } from "../test/support/resourceServer.js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { PaymentPayload } from "@x402/core/types";
import { startDevnet, type Devnet } from "../devnet/evm/index.js";
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

/** The checks of one anvil chain: receipts, Transfer logs and every block's senders. */
function evmAudit(
  name: string,
  network: string,
  client: PublicClient,
  fromBlock: bigint,
  signers: ReadonlySet<string>,
  payTo: string,
  payToStart: bigint,
  payToBalance: () => Promise<bigint>,
): ChainAudit {
  const canonicalReceipt = async (transaction: string) => {
    const receipt = await client
      .getTransactionReceipt({ hash: transaction as Hex })
      .catch(() => undefined);
    if (!receipt) return undefined;
    const block = await client.getBlock({ blockNumber: receipt.blockNumber });
    return block.hash === receipt.blockHash ? receipt : undefined;
  };
  return {
    name,
    network,
    payTo,
    payToStart,
    payToBalance,
    holds: async (transaction) => (await canonicalReceipt(transaction)) !== undefined,
    async transferProblem(transaction, payment) {
      const receipt = await canonicalReceipt(transaction);
      if (!receipt) return "no receipt in a block of the canonical chain";
      if (receipt.status !== "success") return "the transaction reverted";
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
  };
}

const PERMIT2_NETWORK = "eip155:4663";
const PERMIT2_PAY_TO = "0x00000000000000000000000000000000000d0e12";

/**
 * The devnet's anvil chains: `exact` with EIP-3009 USDC on eip155:8453 (the
 * suites' adapter), and `exact` through Permit2 with USDG on eip155:4663,
 * whose payers approve Permit2 once, as their wallets do.
 */
export async function startEvmChains(parts: () => StackParts): Promise<ChaosChain[]> {
  const devnet: Devnet = await startDevnet({
    networks: ["eip155:8453", PERMIT2_NETWORK],
    blockTimeSeconds: 1,
    outFile: null,
    payers: 5,
    facilitators: 4,
  });
  const info = devnet.networks["eip155:8453"]!;
  const signerKeys = info.facilitatorPrivateKeys as Hex[];
  const signers = new Set(signerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase()));
  const stack = (): TestStack =>
    ({
      ...parts(),
      devnet,
      network: "eip155:8453",
      rpcUrl: info.rpcUrl,
      usdc: info.assets["USDC"] as Hex,
      assets: info.assets,
      payerKeys: info.payerPrivateKeys,
    }) as unknown as TestStack;

  const rpc = await startFaultyRpc("eip155:8453", info.rpcUrl);
  const client: PublicClient = createPublicClient({ transport: http(info.rpcUrl) });
  const payTo = evm.payTo(stack());
  const eip3009: ChaosChain = {
    name: "EVM",
    rpc,
    env: {
      EVM_RPC_URLS_8453: rpc.url,
      EVM_PRIVATE_KEYS: signerKeys.join(","),
      EVM_BLOCK_TIME_MS_8453: "1000",
    },
    traffic: {
      ...adapterTraffic(evm, stack, 4),
      async unfunded(amount) {
        const requirements = await requirementsFor(stack(), evm, amount);
        const key = generatePrivateKey();
        const payload: PaymentPayload = await signPayment(key, requirements);
        return { payload, requirements, payer: privateKeyToAccount(key).address };
      },
    },
    anvil: { rpcUrl: info.rpcUrl, signerKeys },
    audit: evmAudit(
      "EVM",
      "eip155:8453",
      client,
      (await client.getBlockNumber()) + 1n,
      signers,
      payTo,
      await evm.balanceOf(stack(), payTo),
      () => evm.balanceOf(stack(), payTo),
    ),
    stop: async () => {
      await rpc.close();
      await devnet.stop();
    },
  };

  const p2 = devnet.networks[PERMIT2_NETWORK]!;
  const usdg = p2.assets["USDG"] as Hex;
  const p2rpc = await startFaultyRpc(PERMIT2_NETWORK, p2.rpcUrl);
  const p2client: PublicClient = createPublicClient({ transport: http(p2.rpcUrl) });
  const payers = (p2.payerPrivateKeys as Hex[]).slice(0, 4).map((k) => privateKeyToAccount(k));
  for (const payer of payers) {
    const wallet = createWalletClient({ account: payer, transport: http(p2.rpcUrl) });
    const hash = await wallet.writeContract({
      address: usdg,
      abi: erc20Abi,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, maxUint256],
      chain: null,
    });
    await p2client.waitForTransactionReceipt({ hash });
  }
  const balanceOfPayTo = () =>
    p2client.readContract({
      address: usdg,
      abi: erc20Abi,
      functionName: "balanceOf",
      args: [PERMIT2_PAY_TO],
    });
  const requirements = async (amount: bigint) => {
    const server = new x402ResourceServer(facilitatorClient(stack())).register(
      PERMIT2_NETWORK,
      new ExactEvmServerScheme(),
    );
    await server.initialize();
    const [r] = await server.buildPaymentRequirements({
      scheme: "exact",
      network: PERMIT2_NETWORK,
      payTo: PERMIT2_PAY_TO,
      price: {
        amount: amount.toString(),
        asset: usdg,
        extra: { assetTransferMethod: "permit2", name: "Global Dollar", version: "1" },
      },
    });
    if (!r) throw new Error("no Permit2 requirements");
    return r;
  };
  const permit2: ChaosChain = {
    name: "EVM Permit2",
    rpc: p2rpc,
    env: { EVM_RPC_URLS_4663: p2rpc.url, EVM_BLOCK_TIME_MS_4663: "1000" },
    traffic: {
      name: "EVM Permit2",
      network: PERMIT2_NETWORK,
      payers: payers.length,
      requirements,
      async pay(i, amount) {
        const r = await requirements(amount);
        const payer = payers[i]!;
        const payload = await new x402Client()
          .register("eip155:*", new ExactEvmClientScheme(payer))
          // USDG is not one of the client's default assets: allowed explicitly.
          .setSpendControls({
            allowedAssets: [
              { network: PERMIT2_NETWORK, asset: usdg, maxAmountPerPayment: "1000000000" },
            ],
          })
          .createPaymentPayload({
            x402Version: 2,
            resource: { url: "http://127.0.0.1/chaos", description: "", mimeType: "" },
            accepts: [r],
          });
        return { payload, requirements: r, payer: payer.address };
      },
    },
    audit: evmAudit(
      "EVM Permit2",
      PERMIT2_NETWORK,
      p2client,
      (await p2client.getBlockNumber()) + 1n,
      signers,
      PERMIT2_PAY_TO,
      await balanceOfPayTo(),
      balanceOfPayTo,
    ),
    stop: () => p2rpc.close(),
  };
  return [eip3009, permit2];
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
