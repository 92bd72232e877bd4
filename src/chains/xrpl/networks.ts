/**
 * XRP Ledger networks this service can settle on, as data. XRP is the
 * native asset (amounts in drops); RLUSD is an issued currency, named by its
 * 160-bit currency code and its issuer, with decimal amounts.
 */
type XrplAsset =
  | { symbol: "XRP"; kind: "native"; decimals: 6 }
  | { symbol: string; kind: "issued"; currency: string; issuer: string; decimals: number };

export interface XrplNetwork {
  readonly family: "xrpl";
  /** CAIP-2 id: `xrpl:` and the network id (0 is mainnet). */
  readonly id: string;
  readonly name: string;
  /** The `NetworkID` rippled reports; transactions carry it only above 1024. */
  readonly networkId: number;
  readonly assets: readonly XrplAsset[];
  readonly schemes: readonly "exact"[];
  /** Settlements here are recorded but never counted against a plan's quota. */
  readonly quotaExempt: boolean;
  readonly explorerTx: string;
}

export const XRPL_MAINNET_ID = "xrpl:0";

export const RLUSD_CURRENCY = "524C555344000000000000000000000000000000";
export const RLUSD_ISSUER = "rMxCKbEDwqr76QuheSUMdEGf4B9xJ8m5De";

export const XRPL_NETWORKS: readonly XrplNetwork[] = [
  {
    family: "xrpl",
    id: XRPL_MAINNET_ID,
    name: "XRP Ledger",
    networkId: 0,
    assets: [
      { symbol: "XRP", kind: "native", decimals: 6 },
      {
        symbol: "RLUSD",
        kind: "issued",
        currency: RLUSD_CURRENCY,
        issuer: RLUSD_ISSUER,
        decimals: 15,
      },
    ],
    schemes: ["exact"],
    quotaExempt: true,
    explorerTx: "https://livenet.xrpl.org/transactions/{tx}",
  },
];

export function findXrplNetwork(id: string): XrplNetwork | undefined {
  return XRPL_NETWORKS.find((n) => n.id === id);
}
