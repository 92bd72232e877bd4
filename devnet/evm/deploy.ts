/**
 * Prepares one fresh anvil chain: places the devnet token contracts at the
 * canonical mainnet token addresses, initializes them, mints to every payer
 * and gives every payer and facilitator signer ETH for gas. Multicall3 goes
 * to its canonical address too: the x402 EVM mechanisms batch diagnostic
 * reads (and ERC-6492 simulations) through it, as on every real chain.
 * Permit2 and the x402 exact and upto Permit2 proxies go to their canonical addresses on
 * every network as well; a Permit2 token (USDG) is a plain ERC-20 that payers
 * approve Permit2 on, as on mainnet.
 *
 * Why canonical addresses: the service, the official x402 clients and any
 * resource server see the same token address on the devnet as on mainnet, so
 * nothing needs a devnet special case. `anvil_setCode` puts runtime code there
 * without running a constructor, which is why the token has `initialize`.
 *
 * Works with automine and with interval mining: setup transactions are signed
 * locally with explicit nonces and gas (so nothing is estimated against a
 * state that a pending transaction is about to change), and on an
 * interval-mined chain one block is mined on demand rather than waiting for
 * the next tick. Every receipt is checked; a revert fails the deploy.
 */
import {
  createPublicClient,
  createTestClient,
  defineChain,
  encodeFunctionData,
  http,
  parseEther,
  type Abi,
  type Address,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import {
  DEVNET_WALLET_FACTORY_ADDRESS as DEVNET_WALLET_FACTORY,
  type AssetInfo,
  type EvmNetwork,
  type TransferMethod,
} from "../../src/chains/evm/networks.js";
import type { Artifacts } from "./compile.js";
import {
  CONFIDENTIAL_NETWORK_ID,
  placeConfidentialVault,
  type ChallengeBounty,
  type DevnetConfidentialInfo,
} from "./confidentialVault.js";
import { devnetDeployerKey } from "./keys.js";

export interface DeployOptions {
  network: EvmNetwork;
  rpcUrl: string;
  artifacts: Artifacts;
  payerKeys: readonly Hex[];
  facilitatorKeys: readonly Hex[];
  /** Atomic units minted to each payer, per token. Default 1,000,000 whole tokens. */
  payerTokenBalance?: bigint;
  /** Owns (initializes, mints) the tokens. Default: the devnet deployer key. */
  ownerKey?: Hex;
  /** The confidential vault's challenge window in seconds (default 0, see confidentialVault.ts). */
  confidentialChallengeWindowSeconds?: number;
  /** The confidential vault's challenge bounty (default none, see confidentialVault.ts). */
  confidentialChallengeBounty?: ChallengeBounty;
}

export interface DeployedNetwork {
  /** symbol → address, for every token placed on the chain. */
  assets: Record<string, Address>;
  /** Assets of the network left out: no devnet contract for their transfer method yet. */
  notDeployed: AssetInfo[];
  /** The token owner (minter). */
  owner: Address;
  /** The confidential settlement vault, on eip155:8453 only. */
  confidential?: DevnetConfidentialInfo;
}

/** Where Multicall3 lives on every major chain. */
export const MULTICALL3_ADDRESS: Address = "0xcA11bde05977b3631167028862bE2a173976CA11";

/** Where Uniswap's Permit2 lives on every major chain. */
export const PERMIT2_ADDRESS: Address = "0x000000000022D473030F116dDEE9F6B43aC78BA3";
/** Where `@x402/evm` expects the x402 exact Permit2 proxy (`x402ExactPermit2ProxyAddress`). */
export const X402_EXACT_PERMIT2_PROXY_ADDRESS: Address =
  "0x402085c248EeA27D92E8b30b2C58ed07f9E20001";
/** Where `@x402/evm` expects the batch-settlement escrow and its deposit collectors. */
export const X402_BATCH_SETTLEMENT_ADDRESS: Address = "0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003";
export const X402_ERC3009_DEPOSIT_COLLECTOR_ADDRESS: Address =
  "0x4020806089470a89826cB9fB1f4059150b550004";
export const X402_PERMIT2_DEPOSIT_COLLECTOR_ADDRESS: Address =
  "0x4020425FAf3B746C082C2f942b4E5159887B0005";
/** The devnet's smart-wallet factory (see the registry). */
export const DEVNET_WALLET_FACTORY_ADDRESS: Address = DEVNET_WALLET_FACTORY;
/** Where `@x402/evm` expects the x402 upto Permit2 proxy (`x402UptoPermit2ProxyAddress`). */
export const X402_UPTO_PERMIT2_PROXY_ADDRESS: Address =
  "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002";

/**
 * Stateless helpers at fixed addresses: code only, nothing to initialize.
 * Permit2 keeps state (used nonces), but all of it starts empty.
 */
const FIXED_CONTRACTS: readonly { contract: string; address: Address }[] = [
  { contract: "DevnetMulticall3", address: MULTICALL3_ADDRESS },
  { contract: "DevnetPermit2", address: PERMIT2_ADDRESS },
  { contract: "DevnetX402ExactPermit2Proxy", address: X402_EXACT_PERMIT2_PROXY_ADDRESS },
  { contract: "DevnetX402UptoPermit2Proxy", address: X402_UPTO_PERMIT2_PROXY_ADDRESS },
  { contract: "DevnetSmartWalletFactory", address: DEVNET_WALLET_FACTORY_ADDRESS },
  { contract: "DevnetX402BatchSettlement", address: X402_BATCH_SETTLEMENT_ADDRESS },
  {
    contract: "DevnetERC3009DepositCollector",
    address: X402_ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  },
  {
    contract: "DevnetPermit2DepositCollector",
    address: X402_PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
  },
];

/** Which devnet contract stands in for a token, by how x402 moves it. */
const CONTRACT_FOR: Record<TransferMethod, string | undefined> = {
  eip3009: "DevnetUSDC",
  // A plain ERC-20 (no EIP-3009, no EIP-2612, like USDG): payers approve Permit2.
  permit2: "DevnetPlainToken",
};

/** `initialize` arguments: the plain token has no EIP-712 domain, so no version. */
function initializeArgs(asset: AssetInfo, owner: Address): readonly unknown[] {
  return asset.transferMethod === "permit2"
    ? [asset.devnetDomain.name, asset.symbol, asset.decimals, owner]
    : [asset.devnetDomain.name, asset.symbol, asset.decimals, asset.devnetDomain.version, owner];
}

const ETH_PER_ACCOUNT = parseEther("1000");
const DEFAULT_WHOLE_TOKENS = 1_000_000n;
// Fixed gas limits, comfortably above measured use (~140k, ~75k), so no
// estimate runs against state an earlier pending setup transaction changes.
const GAS_INITIALIZE = 500_000n;
const GAS_MINT = 200_000n;
const RECEIPT_TIMEOUT_MS = 60_000;

export async function deployNetwork(opts: DeployOptions): Promise<DeployedNetwork> {
  const { network, rpcUrl } = opts;
  const chain = defineChain({
    id: network.chainId,
    name: `${network.name} (devnet)`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const transport = http(rpcUrl, { retryCount: 0 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  const testClient = createTestClient({ chain, transport, mode: "anvil" });
  const owner = privateKeyToAccount(opts.ownerKey ?? devnetDeployerKey());

  const artifact = (name: string): Artifacts[string] => {
    const found = opts.artifacts[name];
    if (!found) throw new Error(`devnet contract ${name} is missing from the compiled artifacts`);
    return found;
  };
  const fixed = FIXED_CONTRACTS.map(({ contract, address }) => ({
    address,
    code: artifact(contract).deployedBytecode,
  }));
  const deployable: { asset: AssetInfo; abi: Abi; code: Hex }[] = [];
  const notDeployed: AssetInfo[] = [];
  for (const asset of network.assets) {
    const name = CONTRACT_FOR[asset.transferMethod];
    if (!name) {
      notDeployed.push(asset);
      continue;
    }
    const { abi, deployedBytecode } = artifact(name);
    deployable.push({ asset, abi, code: deployedBytecode });
  }

  const payers = opts.payerKeys.map((k) => privateKeyToAccount(k).address);
  const facilitators = opts.facilitatorKeys.map((k) => privateKeyToAccount(k).address);
  // Funding and code placement are instant state edits, not transactions.
  await Promise.all([
    ...[owner.address, ...payers, ...facilitators].map((address) =>
      testClient.setBalance({ address, value: ETH_PER_ACCOUNT }),
    ),
    ...[...fixed, ...deployable.map(({ asset, code }) => ({ address: asset.address, code }))].map(
      ({ address, code }) => testClient.setCode({ address, bytecode: code }),
    ),
  ]);

  // Everything below is owner transactions, signed here in nonce order.
  const [automine, startNonce, fees] = await Promise.all([
    testClient.getAutomine(),
    publicClient.getTransactionCount({ address: owner.address, blockTag: "pending" }),
    publicClient.estimateFeesPerGas(),
  ]);
  let nonce = startNonce;
  const sent: { hash: Hex; what: string }[] = [];
  const send = async (to: Address, data: Hex, gas: bigint, what: string): Promise<void> => {
    const raw = await owner.signTransaction({
      type: "eip1559",
      chainId: network.chainId,
      to,
      data,
      gas,
      nonce: nonce++,
      // Headroom: on an interval-mined chain the base fee can move before
      // the transaction is included.
      maxFeePerGas: fees.maxFeePerGas * 2n,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    sent.push({
      hash: await publicClient.sendRawTransaction({ serializedTransaction: raw }),
      what,
    });
  };

  const assets: Record<string, Address> = {};
  for (const { asset, abi } of deployable) {
    await send(
      asset.address,
      encodeFunctionData({
        abi,
        functionName: "initialize",
        args: initializeArgs(asset, owner.address),
      }),
      GAS_INITIALIZE,
      `initialize ${asset.symbol}`,
    );
    const amount = opts.payerTokenBalance ?? DEFAULT_WHOLE_TOKENS * 10n ** BigInt(asset.decimals);
    if (amount > 0n) {
      for (const payer of payers) {
        await send(
          asset.address,
          encodeFunctionData({ abi, functionName: "mint", args: [payer, amount] }),
          GAS_MINT,
          `mint ${asset.symbol} to ${payer}`,
        );
      }
    }
    assets[asset.symbol] = asset.address;
  }

  if (sent.length > 0) {
    if (!automine) await testClient.mine({ blocks: 1 });
    await Promise.all(
      sent.map(async ({ hash, what }) => {
        const receipt = await publicClient.waitForTransactionReceipt({
          hash,
          timeout: RECEIPT_TIMEOUT_MS,
        });
        if (receipt.status !== "success") {
          throw new Error(`devnet setup on ${network.id} failed: ${what} reverted (${hash})`);
        }
      }),
    );
  }
  // The vault holds USDC, so it goes in once the token is initialized.
  const usdc = assets["USDC"];
  const confidential =
    network.id === CONFIDENTIAL_NETWORK_ID && usdc
      ? await placeConfidentialVault({
          rpcUrl,
          chainId: network.chainId,
          artifacts: opts.artifacts,
          usdc,
          tokenOwnerKey: opts.ownerKey ?? devnetDeployerKey(),
          ...(opts.confidentialChallengeWindowSeconds === undefined
            ? {}
            : { challengeWindowSeconds: opts.confidentialChallengeWindowSeconds }),
          ...(opts.confidentialChallengeBounty === undefined
            ? {}
            : { challengeBounty: opts.confidentialChallengeBounty }),
        })
      : undefined;
  return { assets, notDeployed, owner: owner.address, ...(confidential ? { confidential } : {}) };
}
