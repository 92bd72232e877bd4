/**
 * The chain families, one line each, keyed by CAIP-2 namespace. This is the
 * one file outside a family's own folder that names it: configuration,
 * the composition root, the dashboard and the devnet all reach a family
 * through this table. A family's entry (`<family>/entry.ts`) is data and its
 * configuration parser; its code and SDK are imported only when one of its
 * networks is served.
 */
import type { SchemeNetworkServer } from "@x402/core/types";
import type { ChainFamily, FamilyContext, FamilyEntry, NetworkDescription } from "./ports.js";
import { CONFIDENTIAL_NETWORK, type ConfidentialVaultFactory } from "./confidentialPort.js";
import { evmFamily } from "./evm/entry.js";
import { svmFamily } from "./svm/entry.js";
import { xrplFamily } from "./xrpl/entry.js";
import { nearFamily } from "./near/entry.js";
import { starknetFamily } from "./starknet/entry.js";

export const FAMILIES = {
  eip155: evmFamily,
  solana: svmFamily,
  xrpl: xrplFamily,
  near: nearFamily,
  starknet: starknetFamily,
} as const;

export type Namespace = keyof typeof FAMILIES;

export const NAMESPACES = Object.keys(FAMILIES) as Namespace[];

/** What a family serves: its networks, RPC URLs and keys. */
type SetupOf<N extends Namespace> =
  (typeof FAMILIES)[N] extends FamilyEntry<infer S, infer _> ? S : never;
/** How a family runs: its limits and switches. */
type SettingsOf<N extends Namespace> =
  (typeof FAMILIES)[N] extends FamilyEntry<infer _, infer T> ? T : never;

/** What to serve, per family (production: from configuration; devnet: from the devnet). */
export type ChainSetups = { [N in Namespace]?: SetupOf<N> };
/** How to run each family; every family has settings, with defaults. */
export type FamilySettings = { [N in Namespace]: SettingsOf<N> };

/** The family a CAIP-2 network id belongs to, by its namespace. */
function familyEntryOf(network: string): FamilyEntry | undefined {
  const namespace = network.slice(0, network.indexOf(":"));
  return (FAMILIES as Record<string, FamilyEntry | undefined>)[namespace];
}

/** The one spelling of an asset id on a network, for comparing (see FamilyEntry.assetKey). */
export function assetKey(network: string, id: string): string {
  return familyEntryOf(network)?.assetKey?.(id) ?? id;
}

/**
 * An address or asset id as a settlement's record keeps it: hex in lower
 * case, anything else as written (lower-casing a base58 address would name
 * another account, or none).
 */
export function storedSpelling(network: string, id: string): string {
  return familyEntryOf(network)?.hexAddresses ? id.toLowerCase() : id;
}

/** Every network of every family, in the table's order. */
export function describeNetworks(): NetworkDescription[] {
  return NAMESPACES.flatMap((ns) => FAMILIES[ns].networks);
}

/** The first RPC URL a setup gives for a network, if it serves it. */
export function rpcUrlOf(setups: ChainSetups, network: string): string | undefined {
  for (const setup of Object.values(setups)) {
    const found = (
      setup as {
        networks?: readonly { id: string; rpcUrl?: string; rpcUrls?: readonly string[] }[];
      }
    ).networks?.find((n) => n.id === network);
    if (found) return found.rpcUrl ?? found.rpcUrls?.[0];
  }
  return undefined;
}

/** Whether a setup names at least one network. */
function serves(setup: unknown): boolean {
  return ((setup as { networks?: readonly unknown[] } | undefined)?.networks?.length ?? 0) > 0;
}

/** The namespaces with networks to serve. */
export function servedNamespaces(setups: ChainSetups): Namespace[] {
  return NAMESPACES.filter((ns) => serves(setups[ns]));
}

/**
 * Builds every family with networks to serve, in the table's order. A family
 * whose setup is absent is never imported, so an EVM-only deployment pays
 * for no other SDK in start-up time or memory.
 */
export async function createFamilies(
  setups: ChainSetups,
  settings: FamilySettings,
  ctx: FamilyContext,
): Promise<ChainFamily[]> {
  const families: ChainFamily[] = [];
  for (const ns of servedNamespaces(setups)) {
    const entry = FAMILIES[ns] as FamilyEntry;
    const create = await entry.load();
    families.push(await create(setups[ns], settings[ns], ctx));
  }
  return families;
}

/**
 * The `exact` server scheme of a network's family, as a resource server
 * (here: the plans' checkout) registers it for that network.
 */
export async function exactServerSchemeOf(network: string): Promise<SchemeNetworkServer> {
  const entry = familyEntryOf(network);
  if (!entry) throw new Error(`no family serves ${network}`);
  return entry.exactServerScheme();
}

/** The confidential vault's client, from the family whose chain holds the vault. */
export async function loadConfidentialVault(): Promise<ConfidentialVaultFactory> {
  const load = familyEntryOf(CONFIDENTIAL_NETWORK)?.confidentialVault;
  if (!load) throw new Error(`no family offers confidential settlement on ${CONFIDENTIAL_NETWORK}`);
  return load();
}
