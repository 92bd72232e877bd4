/**
 * The local NEAR chain of the devnet: a `NearLedger` running the USDC
 * contract at its mainnet account, funded payers (registered with USDC and
 * holding no NEAR for gas, as x402 payers need none), a registered payTo,
 * and the facilitator's relayer accounts, served on loopback as nearcore's
 * JSON-RPC. Cheap enough to run inside the calling process.
 *
 * Keys come from fixed seeds: the same accounts every run, public test
 * keys (devnet only).
 */
import { createHash } from "node:crypto";
import { KeyPairEd25519, KeyPairSecp256k1, type KeyPair } from "@near-js/crypto";
import { baseEncode } from "@near-js/utils";
import { NEAR_MAINNET_ID, NEAR_USDC } from "../../src/chains/near/networks.js";
import { FungibleToken } from "./fungibleToken.js";
import { NearLedger } from "./ledger.js";
import { serveNear } from "./rpcServer.js";

export const NEAR_MAINNET = NEAR_MAINNET_ID;
const ONE_NEAR = 10n ** 24n;

export interface NearDevnetOptions {
  /** Milliseconds per block (1000 by default; mainnet makes one about every 0.6 s). */
  blockMs?: number;
  payers?: number;
  /** USDC (atomic, 6 decimals) each payer holds. Default 10,000 USDC. */
  payerUsdc?: bigint;
  /** How many relayer accounts to create for the facilitator. */
  relayers?: number;
  /** NEAR each relayer holds. Default 100 NEAR. */
  relayerYocto?: bigint;
  /** How long `send_tx`/`tx` wait for `wait_until` before TIMEOUT_ERROR. */
  waitTimeoutMs?: number;
  port?: number;
}

interface NearDevnetAccount {
  accountId: string;
  /** `ed25519:…` or `secp256k1:…` (devnet only). */
  secretKey: string;
}

/** What `.devnet/devnet.json` holds under `networks["near:mainnet"]`. */
interface NearNetworkInfo {
  rpcUrl: string;
  /**
   * symbol → token contract account, as every family's entry names its
   * assets (files written before this said `asset`: readDevnetFile reads
   * those as `assets.USDC`).
   */
  assets: { USDC: string };
  payers: NearDevnetAccount[];
  /** Registered with USDC: can be paid. */
  payTo: string;
  /** The facilitator's relayers (devnet keys). */
  relayers: NearDevnetAccount[];
}

export interface RunningNear {
  info: NearNetworkInfo;
  ledger: NearLedger;
  stop(): Promise<void>;
}

/** A devnet key pair from a label: the same keys every run (devnet only). */
function devnetNearKey(label: string, curve: "ed25519" | "secp256k1" = "ed25519"): KeyPair {
  const seed = createHash("sha256").update(`x402 devnet near ${label}`).digest();
  const padded = baseEncode(new Uint8Array([...seed, ...new Uint8Array(32)]));
  if (curve === "secp256k1") {
    const pub = new KeyPairSecp256k1(padded).getPublicKey().data;
    return new KeyPairSecp256k1(baseEncode(new Uint8Array([...seed, ...pub])));
  }
  // The constructor reads the seed; the public half is derived, then stored whole.
  const pub = new KeyPairEd25519(padded).getPublicKey().data;
  return new KeyPairEd25519(baseEncode(new Uint8Array([...seed, ...pub])));
}

export async function startNearLedger(opts: NearDevnetOptions = {}): Promise<RunningNear> {
  const ledger = new NearLedger();
  const usdc = new FungibleToken(NEAR_USDC, { name: "USDC", symbol: "USDC", decimals: 6 });
  ledger.deployToken(usdc);
  const payTo = "merchant.devnet.near";
  ledger.createAccount(payTo, ONE_NEAR, devnetNearKey("merchant").getPublicKey().toString());
  usdc.register(payTo);

  const payers: NearDevnetAccount[] = [];
  for (let i = 0; i < (opts.payers ?? 5); i++) {
    const key = devnetNearKey(`payer ${i}`, i % 2 === 1 ? "secp256k1" : "ed25519");
    const accountId = `payer${i}.devnet.near`;
    // A little NEAR for storage only: x402 payers pay no gas.
    ledger.createAccount(accountId, ONE_NEAR / 10n, key.getPublicKey().toString());
    usdc.mint(accountId, opts.payerUsdc ?? 10_000_000_000n);
    payers.push({ accountId, secretKey: key.toString() });
  }
  const relayers: NearDevnetAccount[] = [];
  for (let i = 0; i < (opts.relayers ?? 2); i++) {
    const key = devnetNearKey(`relayer ${i}`);
    const accountId = `relayer${i}.x402.devnet.near`;
    ledger.createAccount(
      accountId,
      opts.relayerYocto ?? 100n * ONE_NEAR,
      key.getPublicKey().toString(),
    );
    relayers.push({ accountId, secretKey: key.toString() });
  }
  ledger.produce();
  ledger.start(opts.blockMs ?? 1000);
  const served = await serveNear(ledger, opts.port ?? 0, opts.waitTimeoutMs ?? 10_000);
  return {
    ledger,
    info: { rpcUrl: served.rpcUrl, assets: { USDC: NEAR_USDC }, payers, payTo, relayers },
    async stop() {
      ledger.stop();
      await served.close();
    },
  };
}
