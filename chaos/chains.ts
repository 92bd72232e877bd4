/**
 * The chains of a chaos run, one entry per family: the devnet's chains,
 * started through their descriptors (devnet/families.ts), each behind its
 * faulty RPC proxy, with what the service processes are given to serve it
 * (the descriptor's `env`), how the traffic pays on it and how the checks
 * read it (the family suites' adapters, test/families/index.ts): the
 * payTo's balance, a success's transfers on the canonical chain, and every
 * transaction our signers sent. No family is named here but the base one,
 * whose chains carry the EVM-only traffic (`upto`, Permit2) and faults.
 */
import {
  createPublicClient,
  createWalletClient,
  erc20Abi,
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
import { UptoEvmScheme as UptoEvmClientScheme } from "@x402/evm/upto/client";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { BASE_DEVNET, devnetFamilies, type RunningBase } from "../devnet/families.js";
import type { RunningDevnetLedger } from "../devnet/family.js";
import { ADAPTERS } from "../test/families/index.js";
import {
  sameAddress,
  type FamilyAdapter,
  type LedgerOutcome,
  type LedgerTransfer,
} from "../test/families/adapter.js";
import { requirementsFor, signedBy } from "../test/families/signing.js";
import { facilitatorClient } from "../test/support/resourceServer.js";
import type { TestStack } from "../test/support/stack.js";
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

/**
 * The checks of one anvil chain: its transfers as the EVM adapter reads
 * them from the canonical chain (`outcome`), and every block's senders.
 */
function evmAudit(
  name: string,
  network: string,
  outcome: (transaction: string) => Promise<LedgerOutcome | undefined>,
  client: PublicClient,
  fromBlock: bigint,
  signers: ReadonlySet<string>,
  payTo: string,
  payToStart: bigint,
  payToBalance: () => Promise<bigint>,
): ChainAudit {
  return {
    name,
    network,
    payTo,
    payToStart,
    payToBalance,
    holds: async (transaction) => (await outcome(transaction)) !== undefined,
    transferProblem: async (transaction, payment) =>
      transferProblem(await outcome(transaction), payment),
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
const UPTO_PAY_TO = "0x00000000000000000000000000000000000d0e13";

/** Each payer's one-time approval of Permit2 on `token`, as its wallet makes it. */
async function approvePermit2(
  client: PublicClient,
  rpcUrl: string,
  token: Hex,
  payers: readonly ReturnType<typeof privateKeyToAccount>[],
): Promise<void> {
  for (const payer of payers) {
    const wallet = createWalletClient({ account: payer, transport: http(rpcUrl) });
    const hash = await wallet.writeContract({
      address: token,
      abi: erc20Abi,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, maxUint256],
      chain: null,
    });
    await client.waitForTransactionReceipt({ hash });
  }
}

/**
 * The devnet's anvil chains: `exact` with EIP-3009 USDC on eip155:8453 (the
 * suites' adapter), `upto` with USDC on the same chain through the x402
 * upto proxy (the payer signs a maximum, the resource server settles what
 * the request cost, less), and `exact` through Permit2 with USDG on
 * eip155:4663; Permit2's payers approve it once, as their wallets do.
 */
export async function startEvmChains(parts: () => StackParts): Promise<ChaosChain[]> {
  const evm = ADAPTERS[BASE_DEVNET.namespace];
  const devnet: RunningBase = await BASE_DEVNET.start({
    networks: [evm.network, PERMIT2_NETWORK],
    blockTimeSeconds: 1,
    outFile: null,
    payers: 5,
    facilitators: 4,
  });
  const info = devnet.networks[evm.network]!;
  const signerKeys = info.facilitatorPrivateKeys as Hex[];
  const signers = new Set(signerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase()));
  const stack = (): TestStack =>
    ({
      ...parts(),
      devnet,
      network: evm.network,
      rpcUrl: info.rpcUrl,
      usdc: info.assets["USDC"] as Hex,
      assets: info.assets,
      payerKeys: info.payerPrivateKeys,
    }) as unknown as TestStack;

  const p2 = devnet.networks[PERMIT2_NETWORK]!;
  const rpc = await startFaultyRpc(evm.network, info.rpcUrl);
  const p2rpc = await startFaultyRpc(PERMIT2_NETWORK, p2.rpcUrl);
  const client: PublicClient = createPublicClient({ transport: http(info.rpcUrl) });
  /** A transaction's transfers on a chain of the devnet, as the EVM adapter reads them. */
  const outcomeOn = (rpcUrl: string) => (transaction: string) =>
    evm.transfersOf({ ...stack(), rpcUrl }, transaction);
  const payTo = evm.payTo(stack());
  const eip3009: ChaosChain = {
    name: "EVM",
    rpc,
    // Every chain's variables, behind its proxy; the Permit2 entry below adds none.
    env: BASE_DEVNET.env(devnet, { [evm.network]: rpc.url, [PERMIT2_NETWORK]: p2rpc.url }),
    traffic: {
      // Named as its chain entry: the checks find a payment's audit by it.
      ...adapterTraffic(evm, stack, 4),
      name: "EVM",
      async unfunded(amount) {
        const requirements = await requirementsFor(stack(), evm, amount);
        const payer = privateKeyToAccount(generatePrivateKey());
        const payload = await new x402Client()
          .register("eip155:*", new ExactEvmClientScheme(payer))
          .createPaymentPayload({
            x402Version: 2,
            resource: { url: "http://127.0.0.1/chaos", description: "", mimeType: "" },
            accepts: [requirements],
          });
        return { payload, requirements, payer: payer.address };
      },
    },
    anvil: { rpcUrl: info.rpcUrl, signerKeys },
    audit: evmAudit(
      "EVM",
      evm.network,
      outcomeOn(info.rpcUrl),
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

  // upto on eip155:8453: its own payTo, so its balance is the sum of its
  // successes alone. The chain, its proxy and its signers' transactions are
  // the EIP-3009 entry's (checked there once).
  const usdc = info.assets["USDC"] as Hex;
  const uptoPayers = (info.payerPrivateKeys as Hex[])
    .slice(0, 4)
    .map((k) => privateKeyToAccount(k));
  await approvePermit2(client, info.rpcUrl, usdc, uptoPayers);
  const uptoBalance = () => evm.balanceOf(stack(), UPTO_PAY_TO);
  /** Requirements for a maximum of `amount`, naming the facilitator account /supported offers. */
  const uptoRequirements = async (amount: bigint): Promise<PaymentRequirements> => {
    const supported = await facilitatorClient(stack()).getSupported();
    const kind = supported.kinds.find((k) => k.network === evm.network && k.scheme === "upto");
    if (!kind) throw new Error(`/supported lists no upto on ${evm.network}`);
    return {
      scheme: "upto",
      network: evm.network,
      asset: usdc,
      amount: amount.toString(),
      payTo: UPTO_PAY_TO,
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2", ...kind.extra },
    };
  };
  const { signerTransactions: _sharedChain, ...uptoAudit } = evmAudit(
    "EVM upto",
    evm.network,
    outcomeOn(info.rpcUrl),
    client,
    0n,
    signers,
    UPTO_PAY_TO,
    await uptoBalance(),
    uptoBalance,
  );
  const upto: ChaosChain = {
    name: "EVM upto",
    rpc,
    env: {},
    traffic: {
      name: "EVM upto",
      network: evm.network,
      payers: uptoPayers.length,
      requirements: uptoRequirements,
      /**
       * Payer `i` authorises up to three times `amount`; the request cost
       * `amount`, and that is what the resource server settles.
       */
      async pay(i, amount) {
        const accepted = await uptoRequirements(amount * 3n);
        const payer = uptoPayers[i]!;
        const partial = await new UptoEvmClientScheme(payer).createPaymentPayload(2, accepted);
        const payload = {
          x402Version: 2,
          accepted,
          payload: partial.payload,
          resource: { url: "http://127.0.0.1/chaos", description: "", mimeType: "" },
        } as PaymentPayload;
        return {
          payload,
          accepted,
          requirements: { ...accepted, amount: amount.toString() },
          payer: payer.address,
        };
      },
    },
    audit: uptoAudit,
    stop: async () => undefined,
  };

  const usdg = p2.assets["USDG"] as Hex;
  const p2client: PublicClient = createPublicClient({ transport: http(p2.rpcUrl) });
  const payers = (p2.payerPrivateKeys as Hex[]).slice(0, 4).map((k) => privateKeyToAccount(k));
  await approvePermit2(p2client, p2.rpcUrl, usdg, payers);
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
    env: {},
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
      outcomeOn(p2.rpcUrl),
      p2client,
      (await p2client.getBlockNumber()) + 1n,
      signers,
      PERMIT2_PAY_TO,
      await balanceOfPayTo(),
      balanceOfPayTo,
    ),
    stop: () => p2rpc.close(),
  };
  return [eip3009, upto, permit2];
}

/**
 * Why a transaction (`outcome`: what it did, as its family's adapter reads
 * the ledger) is not exactly one move of `payment`, or undefined when it is.
 */
function transferProblem(
  outcome: LedgerOutcome | undefined,
  payment: PaymentRecord,
): string | undefined {
  if (!outcome) return "the chain does not hold it (in a block of its canonical chain)";
  if ("failure" in outcome) return outcome.failure;
  const transfers: LedgerTransfer[] = outcome.transfers;
  const matching = transfers.filter(
    (t) =>
      sameAddress(t.from, payment.payer) &&
      sameAddress(t.to, payment.payTo) &&
      sameAddress(t.asset, payment.asset) &&
      t.amount === payment.amount,
  );
  if (matching.length === 1) return undefined;
  return `${matching.length} matching transfers (of ${transfers.length}: ${transfers
    .map((t) => `${t.amount} ${t.asset} ${t.from}→${t.to}`)
    .join("; ")}) of ${payment.amount} ${payment.asset} from ${payment.payer} to ${payment.payTo}`;
}

/** Payers the traffic uses on each ledger. */
const LEDGER_PAYERS = 3;

/**
 * The loopback ledger of every family in the devnet's table (Solana on
 * LiteSVM; NEAR, XRPL and Starknet executing for real in-process), each
 * started at its descriptor's quick pace and behind its faulty proxy, the
 * service given the descriptor's variables for it. Their checks read the
 * ledger itself through the family's adapter, as strictly as anvil's: a
 * success's transaction must be one it holds, in a block (these ledgers
 * have no forks: what they hold is the canonical chain), whose one transfer
 * moved exactly the payment's amount of its asset from the payer to the
 * payTo; and the payTo's balance must be the sum of the successes.
 */
export async function startLedgerChains(parts: () => StackParts): Promise<ChaosChain[]> {
  const families = devnetFamilies();
  const started = await Promise.allSettled(
    families.map(([, family]) => family.start(family.quick) as Promise<RunningDevnetLedger>),
  );
  const ledgers = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = started.find((r) => r.status === "rejected");
  if (failed) {
    await Promise.all(ledgers.map((l) => l.stop()));
    throw failed.reason;
  }
  const running = Object.fromEntries(families.map(([namespace], i) => [namespace, ledgers[i]]));
  const stack = (): TestStack => ({ ...parts(), families: running }) as unknown as TestStack;
  return Promise.all(
    families.map(async ([namespace, family], i): Promise<ChaosChain> => {
      const ledger = ledgers[i]!;
      const adapter: FamilyAdapter = ADAPTERS[namespace];
      const rpc = await startFaultyRpc(family.network, ledger.info.rpcUrl);
      const outcome = (transaction: string) => adapter.transfersOf(stack(), transaction);
      const payTo = adapter.payTo(stack());
      return {
        name: adapter.name,
        rpc,
        env: family.env(ledger, rpc.url),
        traffic: adapterTraffic(adapter, stack, LEDGER_PAYERS),
        audit: {
          name: adapter.name,
          network: adapter.network,
          payTo,
          payToStart: await adapter.balanceOf(stack(), payTo),
          payToBalance: () => adapter.balanceOf(stack(), payTo),
          holds: async (transaction) => (await outcome(transaction)) !== undefined,
          transferProblem: async (transaction, payment) =>
            transferProblem(await outcome(transaction), payment),
        },
        stop: async () => {
          await rpc.close();
          await ledger.stop();
        },
      };
    }),
  );
}
