/**
 * Starknet networks this service can settle on, as data. Addresses are
 * felts: compare them as numbers, never as strings (padding and case vary).
 * The fee token (STRK) is what our executor accounts pay v3 transactions
 * with; the devnet deploys both tokens at their mainnet addresses.
 */
interface StarknetAsset {
  readonly symbol: string;
  readonly address: string;
  readonly decimals: number;
}

export interface StarknetNetwork {
  readonly family: "starknet";
  /** CAIP-2 id: `starknet:` and the chain id as a short string. */
  readonly id: string;
  readonly name: string;
  /** `starknet_chainId`: the short string, as a hex felt. */
  readonly chainId: string;
  readonly assets: readonly StarknetAsset[];
  readonly feeToken: StarknetAsset;
  readonly schemes: readonly "exact"[];
  readonly explorerTx: string;
}

export const STARKNET_MAINNET_ID = "starknet:SN_MAIN";

export const STARKNET_USDC = "0x033068F6539f8e6e6b131e6B2B814e6c34A5224bC66947c47DaB9dFeE93b35fb";
export const STARKNET_STRK = "0x04718f5a0fc34cc1af16a1cdee98ffb20c31f5cd61d6ab07201858f4287c938d";

export const STARKNET_NETWORKS: readonly StarknetNetwork[] = [
  {
    family: "starknet",
    id: STARKNET_MAINNET_ID,
    name: "Starknet",
    chainId: "0x534e5f4d41494e",
    assets: [{ symbol: "USDC", address: STARKNET_USDC, decimals: 6 }],
    feeToken: { symbol: "STRK", address: STARKNET_STRK, decimals: 18 },
    schemes: ["exact"],
    explorerTx: "https://voyager.online/tx/{tx}",
  },
];

export function findStarknetNetwork(id: string): StarknetNetwork | undefined {
  return STARKNET_NETWORKS.find((n) => n.id === id);
}
