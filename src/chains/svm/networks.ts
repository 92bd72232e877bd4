/**
 * Solana networks this service can settle on, as data. The mint is the
 * canonical mainnet USDC mint; the devnet creates it at the same address.
 */
export interface SvmNetwork {
  readonly family: "solana";
  /** CAIP-2 id: `solana:` and the genesis hash prefix. */
  readonly id: string;
  readonly name: string;
  readonly assets: readonly { symbol: string; mint: string; decimals: number }[];
  readonly schemes: readonly "exact"[];
  /** Typical slot time. */
  readonly slotMs: number;
  readonly explorerTx: string;
}

export const SOLANA_MAINNET_ID = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";

export const SVM_NETWORKS: readonly SvmNetwork[] = [
  {
    family: "solana",
    id: SOLANA_MAINNET_ID,
    name: "Solana",
    assets: [{ symbol: "USDC", mint: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", decimals: 6 }],
    schemes: ["exact"],
    slotMs: 400,
    explorerTx: "https://solscan.io/tx/{tx}",
  },
];

export function findSvmNetwork(id: string): SvmNetwork | undefined {
  return SVM_NETWORKS.find((n) => n.id === id);
}
