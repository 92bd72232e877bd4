/**
 * The network registry: every network this service can settle on, as data.
 *
 * This is the single place that names a chain, its default asset and the
 * schemes we offer there. Chain adapters, the devnet and `/supported` all read
 * it; nothing else hard-codes a chain id or a token address.
 *
 * Token addresses are the canonical mainnet deployments. The EIP-712 domain
 * (`name`, `version`) listed here is only what the devnet token is created
 * with: the service itself reads each token's domain from the chain at start
 * and caches it, so a wrong guess here can never make a real payment fail.
 */

type SchemeName = "exact" | "upto" | "batch-settlement";

/** How a token is moved for the `exact` scheme. */
export type TransferMethod = "eip3009" | "permit2";

export interface AssetInfo {
  readonly symbol: string;
  readonly address: `0x${string}`;
  readonly decimals: number;
  readonly transferMethod: TransferMethod;
  /** EIP-712 domain the devnet copy of the token is created with. */
  readonly devnetDomain: { readonly name: string; readonly version: string };
  /** Whether the token implements EIP-2612 `permit`. */
  readonly supportsEip2612: boolean;
}

export interface EvmNetwork {
  readonly family: "eip155";
  /** CAIP-2 id, e.g. `eip155:8453`. */
  readonly id: `eip155:${number}`;
  readonly chainId: number;
  readonly name: string;
  /** The default asset first. */
  readonly assets: readonly AssetInfo[];
  readonly schemes: readonly SchemeName[];
  /** Typical block time, used to size receipt polling. */
  readonly blockTimeMs: number;
  /** A public explorer's transaction page, `{tx}` standing for the hash; absent: none known. */
  readonly explorerTx?: string;
  /**
   * An OP-stack chain: every transaction also pays an L1 data fee, which
   * the chain's GasPriceOracle predeploy prices and the sender must hold.
   */
  readonly opStack?: true;
}

/** Base, OP Mainnet, Celo, Unichain and World Chain run the OP stack. */
const OP_STACK_CHAIN_IDS: ReadonlySet<number> = new Set([8453, 10, 42220, 130, 480]);

const EVM_SCHEMES: readonly SchemeName[] = ["exact", "upto", "batch-settlement"];

function usdc(address: `0x${string}`, name: "USD Coin" | "USDC"): AssetInfo {
  return {
    symbol: "USDC",
    address,
    decimals: 6,
    transferMethod: "eip3009",
    devnetDomain: { name, version: "2" },
    supportsEip2612: true,
  };
}

function evm(
  chainId: number,
  name: string,
  assets: readonly AssetInfo[],
  blockTimeMs: number,
  explorer?: string,
): EvmNetwork {
  return {
    family: "eip155",
    id: `eip155:${chainId}`,
    chainId,
    name,
    assets,
    schemes: EVM_SCHEMES,
    blockTimeMs,
    ...(explorer ? { explorerTx: `${explorer}/tx/{tx}` } : {}),
    ...(OP_STACK_CHAIN_IDS.has(chainId) ? { opStack: true as const } : {}),
  };
}

export const EVM_NETWORKS: readonly EvmNetwork[] = [
  evm(
    8453,
    "Base",
    [usdc("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "USD Coin")],
    2000,
    "https://basescan.org",
  ),
  evm(
    42161,
    "Arbitrum One",
    [usdc("0xaf88d065e77c8cC2239327C5EDb3A432268e5831", "USD Coin")],
    250,
    "https://arbiscan.io",
  ),
  evm(
    10,
    "OP Mainnet",
    [usdc("0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85", "USD Coin")],
    2000,
    "https://optimistic.etherscan.io",
  ),
  evm(
    137,
    "Polygon PoS",
    [usdc("0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359", "USD Coin")],
    2000,
    "https://polygonscan.com",
  ),
  evm(
    43114,
    "Avalanche C-Chain",
    [usdc("0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E", "USD Coin")],
    2000,
    "https://snowtrace.io",
  ),
  evm(
    42220,
    "Celo",
    [usdc("0xcebA9300f2b948710d2653dD7B07f33A8B32118C", "USDC")],
    1000,
    "https://celoscan.io",
  ),
  evm(
    59144,
    "Linea",
    [usdc("0x176211869cA2b568f2A7D4EE941E073a821EE1ff", "USD Coin")],
    2000,
    "https://lineascan.build",
  ),
  evm(
    130,
    "Unichain",
    [usdc("0x078D782b760474a361dDA0AF3839290b0EF57AD6", "USDC")],
    1000,
    "https://uniscan.xyz",
  ),
  evm(
    480,
    "World Chain",
    [usdc("0x79A02482A880bCE3F13e09Da970dC34db4CD24d1", "USDC")],
    2000,
    "https://worldscan.org",
  ),
  evm(
    143,
    "Monad",
    [usdc("0x754704Bc059F8C67012fEd69BC8A327a5aafb603", "USDC")],
    500,
    "https://monadscan.com",
  ),
  evm(
    4663,
    "USDG chain",
    [
      {
        // Paxos deploys USDG at one address across its EVM chains. USDG has
        // neither EIP-3009 nor EIP-2612, so `exact` goes through Permit2.
        symbol: "USDG",
        address: "0xe343167631d89B6Ffc58B88d6b7fB0228795491D",
        decimals: 6,
        transferMethod: "permit2",
        devnetDomain: { name: "Global Dollar", version: "1" },
        supportsEip2612: false,
      },
    ],
    1000,
  ),
];

const BY_ID = new Map<string, EvmNetwork>(EVM_NETWORKS.map((n) => [n.id, n]));

/** Looks a network up by CAIP-2 id; undefined when we do not serve it. */
export function findEvmNetwork(id: string): EvmNetwork | undefined {
  return BY_ID.get(id);
}

/**
 * The devnet's smart-wallet factory (a devnet contract, not a mainnet one):
 * counterfactual ERC-6492 payers on the devnet name it, so devnet mode allows
 * it unless EVM_ERC6492_FACTORIES says otherwise.
 */
export const DEVNET_WALLET_FACTORY_ADDRESS = "0x6492000000000000000000000000000000006492";
