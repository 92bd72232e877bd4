/**
 * NEAR networks this service can settle on, as data. USDC is an NEP-141
 * token contract; amounts are atomic units (6 decimals), paid with an
 * `ft_transfer` inside the payer's NEP-366 delegate action.
 */
interface NearAsset {
  symbol: string;
  /** The token contract's account id. */
  contract: string;
  decimals: number;
}

export interface NearNetwork {
  readonly family: "near";
  /** CAIP-2 id: `near:` and the chain id nearcore reports. */
  readonly id: string;
  readonly name: string;
  readonly chainId: string;
  readonly assets: readonly NearAsset[];
  readonly schemes: readonly "exact"[];
  readonly explorerTx: string;
}

export const NEAR_MAINNET_ID = "near:mainnet";
export const NEAR_USDC = "17208628f84f5d6ad33f0da3bbbeb27ffcb398eac501a31bd6ad2011e36133a1";

export const NEAR_NETWORKS: readonly NearNetwork[] = [
  {
    family: "near",
    id: NEAR_MAINNET_ID,
    name: "NEAR",
    chainId: "mainnet",
    assets: [{ symbol: "USDC", contract: NEAR_USDC, decimals: 6 }],
    schemes: ["exact"],
    explorerTx: "https://nearblocks.io/txns/{tx}",
  },
];

export function findNearNetwork(id: string): NearNetwork | undefined {
  return NEAR_NETWORKS.find((n) => n.id === id);
}
