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
import { UptoEvmScheme as UptoEvmClientScheme } from "@x402/evm/upto/client";
import { facilitatorClient } from "../test/support/resourceServer.js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { startDevnet, type Devnet } from "../devnet/evm/index.js";
import type { FamilyAdapter } from "../test/families/adapter.js";
import { evm } from "../test/families/evm.js";
import { near } from "../test/families/near.js";
import { solana } from "../test/families/solana.js";
import { starknet } from "../test/families/starknet.js";
import { xrpl } from "../test/families/xrpl.js";
import { address, getCompiledTransactionMessageDecoder } from "@solana/kit";
import { associatedTokenAccount, startSolanaLedger } from "../devnet/svm/index.js";
import type { LandedTransaction } from "../devnet/svm/ledger.js";
import type { TxRecord as NearTxRecord } from "../devnet/near/ledger.js";
import type { LedgerTx as XrplLedgerTx } from "../devnet/xrpl/ledger.js";
import {
  TRANSFER_EVENT_KEY as STARKNET_TRANSFER_KEY,
  type TxRecord as StarknetTxRecord,
} from "../devnet/starknet/ledger.js";
import { startNearLedger } from "../devnet/near/index.js";
import { startXrplLedger } from "../devnet/xrpl/index.js";
import { startStarknetLedger } from "../devnet/starknet/index.js";
import { requirementsFor, signedBy } from "../test/families/signing.js";
import type { TestStack } from "../test/support/stack.js";
import { signPayment } from "../test/chains/evm/payments.js";
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
      // Named as its chain entry: the checks find a payment's audit by it.
      ...adapterTraffic(evm, stack, 4),
      name: "EVM",
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
    const kind = supported.kinds.find((k) => k.network === "eip155:8453" && k.scheme === "upto");
    if (!kind) throw new Error("/supported lists no upto on eip155:8453");
    return {
      scheme: "upto",
      network: "eip155:8453",
      asset: usdc,
      amount: amount.toString(),
      payTo: UPTO_PAY_TO,
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2", ...kind.extra },
    };
  };
  const { signerTransactions: _sharedChain, ...uptoAudit } = evmAudit(
    "EVM upto",
    "eip155:8453",
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
      network: "eip155:8453",
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

  const p2 = devnet.networks[PERMIT2_NETWORK]!;
  const usdg = p2.assets["USDG"] as Hex;
  const p2rpc = await startFaultyRpc(PERMIT2_NETWORK, p2.rpcUrl);
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
  return [eip3009, upto, permit2];
}

/** Why `transfers` (what one transaction moved) is not exactly one move of `payment`. */
function oneTransferProblem(
  transfers: readonly { from: string; to: string; asset: string; amount: bigint }[],
  payment: PaymentRecord,
  same: (a: string, b: string) => boolean = (a, b) => a === b,
): string | undefined {
  const matching = transfers.filter(
    (t) =>
      same(t.from, payment.payer) &&
      same(t.to, payment.payTo) &&
      same(t.asset, payment.asset) &&
      t.amount === payment.amount,
  );
  if (matching.length === 1) return undefined;
  return `${matching.length} matching transfers (of ${transfers.length}: ${transfers
    .map((t) => `${t.amount} ${t.asset} ${t.from}→${t.to}`)
    .join("; ")}) of ${payment.amount} ${payment.asset} from ${payment.payer} to ${payment.payTo}`;
}

const SPL_TOKEN_PROGRAMS = new Set([
  "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
  "TokenzQdBNbLqP5VEhdkAS6EPFLC1PhnBqCXEpPxuEb",
]);
/** SPL Token's `TransferChecked` instruction: [source, mint, destination, authority]. */
const TRANSFER_CHECKED = 12;

/** The SPL `TransferChecked`s of a landed Solana transaction, by token owner (the payTo's ATA is resolved). */
async function solanaTransferProblem(
  landed: LandedTransaction,
  payment: PaymentRecord,
): Promise<string | undefined> {
  if (landed.err) return `the transaction failed: ${JSON.stringify(landed.err)}`;
  const message = getCompiledTransactionMessageDecoder().decode(landed.messageBytes);
  const keys = message.staticAccounts.map(String);
  const payToAccount = String(
    await associatedTokenAccount(address(payment.payTo), address(payment.asset)),
  );
  // Legacy and v0 messages (the ones x402 payers sign) list instructions so.
  const instructions =
    (
      message as {
        instructions?: {
          programAddressIndex: number;
          accountIndices?: number[];
          data?: Uint8Array;
        }[];
      }
    ).instructions ?? [];
  const transfers = instructions.flatMap((ix) => {
    const data = ix.data;
    const accounts = ix.accountIndices ?? [];
    if (!SPL_TOKEN_PROGRAMS.has(keys[ix.programAddressIndex]!) || !data) return [];
    if (data[0] !== TRANSFER_CHECKED || data.length < 10 || accounts.length < 4) return [];
    const amount = new DataView(data.buffer, data.byteOffset + 1, 8).getBigUint64(0, true);
    const destination = keys[accounts[2]!]!;
    return [
      {
        from: keys[accounts[3]!]!,
        // The payTo is an owner; the transfer credits its token account.
        to: destination === payToAccount ? payment.payTo : destination,
        asset: keys[accounts[1]!]!,
        amount,
      },
    ];
  });
  return oneTransferProblem(transfers, payment);
}

/** The NEP-141 `ft_transfer` events a NEAR transaction's receipts logged. */
function nearTransferProblem(record: NearTxRecord, payment: PaymentRecord): string | undefined {
  if (record.height === undefined) return "not in a block";
  const transfers = (record.receiptsOutcome ?? []).flatMap(({ outcome }) =>
    outcome.logs.flatMap((log) => {
      if (!log.startsWith("EVENT_JSON:")) return [];
      const event = JSON.parse(log.slice("EVENT_JSON:".length)) as {
        standard?: string;
        event?: string;
        data?: { old_owner_id: string; new_owner_id: string; amount: string }[];
      };
      if (event.standard !== "nep141" || event.event !== "ft_transfer") return [];
      return (event.data ?? []).map((d) => ({
        from: d.old_owner_id,
        to: d.new_owner_id,
        asset: outcome.executor_id,
        amount: BigInt(d.amount),
      }));
    }),
  );
  return oneTransferProblem(transfers, payment);
}

/** An XRPL Payment, validated, and what it delivered. */
function xrplTransferProblem(record: XrplLedgerTx, payment: PaymentRecord): string | undefined {
  if (record.ledgerIndex === undefined) return "not in a validated ledger";
  const result = record.meta["TransactionResult"];
  if (result !== "tesSUCCESS") return `the transaction's result is ${String(result)}`;
  const delivered = record.meta["delivered_amount"];
  const transfers =
    record.tx["TransactionType"] === "Payment" && typeof delivered === "string"
      ? [
          {
            from: String(record.tx["Account"]),
            to: String(record.tx["Destination"]),
            asset: "XRP",
            amount: BigInt(delivered),
          },
        ]
      : [];
  return oneTransferProblem(transfers, payment);
}

/** The ERC-20 `Transfer` events of a Starknet transaction: keys [selector, from, to], data [low, high]. */
function starknetTransferProblem(
  record: StarknetTxRecord,
  payment: PaymentRecord,
): string | undefined {
  if (record.execution !== "SUCCEEDED")
    return `the transaction ${record.execution ?? "is not executed"}`;
  if (record.blockNumber === undefined) return "not in a block";
  const transfers = record.events.flatMap((e) =>
    BigInt(e.keys[0] ?? 0) === BigInt(STARKNET_TRANSFER_KEY) && e.keys.length >= 3
      ? [
          {
            from: e.keys[1]!,
            to: e.keys[2]!,
            asset: e.from_address,
            amount: BigInt(e.data[0] ?? 0) + (BigInt(e.data[1] ?? 0) << 128n),
          },
        ]
      : [],
  );
  return oneTransferProblem(transfers, payment, (a, b) => BigInt(a) === BigInt(b));
}

/**
 * The loopback ledgers of the other families (Solana on LiteSVM; NEAR, XRPL
 * and Starknet executing for real in-process), each behind its faulty
 * proxy. Their checks read the ledger itself, as strictly as anvil's: a
 * success's transaction must be one it holds, in a block (these ledgers
 * have no forks: what they hold is the canonical chain), whose one transfer
 * moved exactly the payment's amount of its asset from the payer to the
 * payTo; and the payTo's balance must be the sum of the successes.
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
      families: { solana: sol, near: nearLedger, xrpl: xrplLedger, starknet: stark },
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
    transferProblem: (
      reference: string,
      payment: PaymentRecord,
    ) => string | undefined | Promise<string | undefined>,
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
        transferProblem: async (reference, payment) =>
          holds(reference)
            ? transferProblem(reference, payment)
            : "the ledger does not hold this transaction",
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
      (ref, payment) => solanaTransferProblem(sol.ledger.transaction(ref)!, payment),
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
      (ref, payment) => nearTransferProblem(nearLedger.ledger.transaction(ref)!, payment),
      () => nearLedger.stop(),
    ),
    chain(
      "XRPL",
      xrpl,
      proxies[2]!,
      { XRPL_RPC_URL: proxies[2]!.url },
      3,
      (ref) => xrplLedger.ledger.transaction(ref) !== undefined,
      (ref, payment) => xrplTransferProblem(xrplLedger.ledger.transaction(ref)!, payment),
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
      (ref, payment) => starknetTransferProblem(stark.ledger.transaction(ref)!, payment),
      () => stark.stop(),
    ),
  ]);
}
