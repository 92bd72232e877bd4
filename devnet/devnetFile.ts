/**
 * The devnet file (`.devnet/devnet.json` by default): everything a script
 * needs to use a running devnet: RPC URLs, token addresses, funded payer
 * keys, and (added by `npm start`) the facilitator URL and an API key.
 *
 * Invariants:
 *   - Writes are atomic (temp file in the same folder + rename), so a reader
 *     polling for the file never sees half of it.
 *   - `updateDevnetFile` merges into what is on disk and keeps fields it does
 *     not know, so the devnet and the service can each add their own.
 *   - The file holds private keys (public test keys, but still): it is
 *     created readable by its owner only.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Address, Hex } from "viem";
import type { DevnetConfidentialInfo } from "./evm/confidentialVault.js";

export interface DevnetNetworkInfo {
  rpcUrl: string;
  chainId: number;
  /** symbol → token address (canonical mainnet address). */
  assets: Record<string, Address>;
  payerPrivateKeys: Hex[];
  facilitatorPrivateKeys: Hex[];
  /** The confidential settlement vault and its keys (on the vault's chain only). */
  confidential?: DevnetConfidentialInfo;
}

export interface DevnetFile {
  version: 1;
  /** ISO 8601. */
  startedAt: string;
  /** 0 = one block per transaction. */
  blockTimeSeconds: number;
  /** Added by the service once it listens. */
  facilitatorUrl?: string;
  /** Added by the service: an API key for the facilitator. Devnet only. */
  apiKey?: string;
  /** By CAIP-2 id. */
  networks: Record<string, DevnetNetworkInfo>;
}

export const DEFAULT_DEVNET_FILE = ".devnet/devnet.json";

export async function readDevnetFile(path: string): Promise<DevnetFile> {
  const parsed = JSON.parse(await readFile(path, "utf8")) as unknown;
  if (!isDevnetFile(parsed)) {
    throw new Error(`${path} is not a devnet file (version 1 with networks)`);
  }
  return withAssetMaps(parsed);
}

/**
 * Files written before every entry named its assets as one map from symbol
 * to asset id are read in today's shape (docs/devnet-file.schema.json): an
 * entry's single `asset` becomes `assets.USDC`, and an issued currency given
 * as `{ currency, issuer }` becomes its code in `assets` and its issuer in
 * `issuers`.
 */
function withAssetMaps(file: DevnetFile): DevnetFile {
  const networks: Record<string, unknown> = { ...file.networks };
  for (const [id, entry] of Object.entries(networks)) {
    let e = entry as Record<string, unknown>;
    if (typeof e["asset"] === "string" && e["assets"] === undefined) {
      const { asset, ...rest } = e;
      e = { ...rest, assets: { USDC: asset } };
    }
    const assets = e["assets"] as Record<string, unknown> | undefined;
    const issued = Object.entries(assets ?? {}).filter(
      (kv): kv is [string, { currency: string; issuer: string }] =>
        typeof kv[1] === "object" && kv[1] !== null && "currency" in kv[1] && "issuer" in kv[1],
    );
    if (issued.length > 0) {
      e = {
        ...e,
        assets: { ...assets, ...Object.fromEntries(issued.map(([k, v]) => [k, v.currency])) },
        issuers: {
          ...(e["issuers"] as object | undefined),
          ...Object.fromEntries(issued.map(([k, v]) => [k, v.issuer])),
        },
      };
    }
    networks[id] = e;
  }
  return { ...file, networks: networks as DevnetFile["networks"] };
}

export async function writeDevnetFile(path: string, file: DevnetFile): Promise<void> {
  await writeJsonAtomically(path, file);
}

/**
 * Merges `patch` into the file on disk (top level), keeping every other
 * field, known or not. The file must exist: the devnet writes it first.
 */
export async function updateDevnetFile(path: string, patch: Partial<DevnetFile>): Promise<void> {
  const current = JSON.parse(await readFile(path, "utf8")) as unknown;
  if (!isDevnetFile(current)) throw new Error(`${path} is not a devnet file`);
  await writeJsonAtomically(path, { ...current, ...patch });
}

/** Adds (or replaces) one network's entry, for families whose entry has its own shape. */
export async function addDevnetNetwork(path: string, id: string, entry: object): Promise<void> {
  const current = JSON.parse(await readFile(path, "utf8")) as unknown;
  if (!isDevnetFile(current)) throw new Error(`${path} is not a devnet file`);
  await writeJsonAtomically(path, { ...current, networks: { ...current.networks, [id]: entry } });
}

function isDevnetFile(value: unknown): value is DevnetFile {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return v["version"] === 1 && typeof v["networks"] === "object" && v["networks"] !== null;
}

async function writeJsonAtomically(path: string, value: unknown): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  // Unique per write: two updates in one process must not share a temp file.
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(tmp, JSON.stringify(value, null, 2) + "\n", { mode: 0o600 });
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}
