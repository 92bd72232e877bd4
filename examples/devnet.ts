/**
 * What the examples know of the running devnet: the file `npm start` writes
 * (`.devnet/devnet.json`, or `DEVNET_FILE`), with the facilitator URL and API
 * key, and for each network its RPC URL, assets, funded payer keys and a
 * `payTo` able to receive. Every example reads it through here, so a change
 * of the file's shape is followed in one place.
 */
import { readFileSync } from "node:fs";
import type { Namespace } from "../src/chains/index.js";

/** A chain family, by its namespace in the family table (src/chains/index.ts). */
export type Family = Namespace;

/**
 * The network each example pays on, one per chain family: a record over the
 * family table, so a family without its network here does not compile, and
 * then neither do the examples' maps of payers and server schemes.
 */
export const NETWORKS = {
  eip155: "eip155:8453",
  solana: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
  near: "near:mainnet",
  xrpl: "xrpl:0",
  starknet: "starknet:SN_MAIN",
} as const satisfies Record<Family, string>;

/** The families in the examples' order. */
export const FAMILIES = Object.keys(NETWORKS) as Family[];

/** A family's name in `--network` where it is not its namespace: the chain the examples pay on. */
const SHORT_NAMES: Partial<Record<Family, string>> = { eip155: "base" };

/** The name the examples print for a family, and the one `--network` is documented with. */
export const nameOf = (family: Family): string => SHORT_NAMES[family] ?? family;

/** A name the examples' `--network` takes: a family's name, its namespace or its network's id. */
export function familyOf(name: string): Family {
  const found = FAMILIES.find((f) => [nameOf(f), f, NETWORKS[f]].includes(name));
  if (!found) {
    throw new Error(`--network ${name}: one of ${FAMILIES.map(nameOf).join(", ")}`);
  }
  return found;
}

/** What every network's entry has; `assets` is symbol → the asset as the chain names it. */
interface Entry {
  rpcUrl: string;
  assets: Record<string, unknown>;
}

/** Each family's entry: the fields its payer and resource server need (every family, or `entry` does not compile). */
export interface Entries {
  eip155: Entry & { payerPrivateKeys: `0x${string}`[] };
  solana: Entry & { payerSecretKeys: string[]; payTo: string };
  near: Entry & { payers: { accountId: string; secretKey: string }[]; payTo: string };
  xrpl: Entry & { wsUrl: string; payerSeeds: string[]; payTo: string };
  starknet: Entry & { payers: { address: string; privateKey: string }[]; payTo: string };
}

export interface Devnet {
  facilitatorUrl: string;
  apiKey: string;
  /** The families this devnet runs (`DEVNET_NETWORKS` may leave some out). */
  families: Family[];
  entry<F extends Family>(family: F): Entries[F];
  /** The symbol of `asset` on `network` (`USDC`, `RLUSD`…), or the asset itself. */
  symbolOf(network: string, asset: string): string;
}

export function readDevnet(path = process.env["DEVNET_FILE"] ?? ".devnet/devnet.json"): Devnet {
  let file: { facilitatorUrl?: string; apiKey?: string; networks?: Record<string, RawEntry> };
  try {
    file = JSON.parse(readFileSync(path, "utf8")) as typeof file;
  } catch {
    throw new Error(`no devnet file at ${path}: start the devnet first (npm start)`);
  }
  const { facilitatorUrl, apiKey } = file;
  if (!facilitatorUrl || !apiKey) {
    throw new Error(`${path} has no facilitator yet: wait for npm start's banner`);
  }
  const networks = Object.fromEntries(
    Object.entries(file.networks ?? {}).map(([id, raw]) => [id, withAssets(raw)]),
  );
  const entry = <F extends Family>(family: F): Entries[F] => {
    const found = networks[NETWORKS[family]];
    if (!found) {
      throw new Error(`this devnet does not run ${NETWORKS[family]} (see DEVNET_NETWORKS)`);
    }
    return found as unknown as Entries[F];
  };
  return {
    facilitatorUrl,
    apiKey,
    families: FAMILIES.filter((f) => networks[NETWORKS[f]]),
    entry,
    symbolOf(network, asset) {
      const assets = networks[network]?.assets ?? {};
      const symbol = Object.entries(assets).find(([, a]) => sameAsset(a, asset))?.[0];
      return symbol ?? asset;
    },
  };
}

type RawEntry = Partial<Entry> & { asset?: unknown } & Record<string, unknown>;

/**
 * Every family names its assets in `assets` (symbol → asset id); NEAR's
 * entry had a single `asset` (USDC) before it did. Both are read the same.
 */
function withAssets(raw: RawEntry): Entry & Record<string, unknown> {
  const assets =
    raw.assets ?? (typeof raw.asset === "string" ? { USDC: raw.asset } : ({} as Entry["assets"]));
  return { ...raw, rpcUrl: String(raw.rpcUrl), assets };
}

/** An asset id as requirements carry it; an XRPL issued currency is listed with its issuer. */
function sameAsset(listed: unknown, asset: string): boolean {
  if (typeof listed === "string") return listed.toLowerCase() === asset.toLowerCase();
  const currency = (listed as { currency?: unknown } | null)?.currency;
  return typeof currency === "string" && currency === asset;
}
