/**
 * The local XRP Ledger of the devnet: an `XrplLedger` with XRP and RLUSD,
 * funded payers (each with an RLUSD trust line and balance) and a payTo
 * account that can receive both, served on loopback as rippled's WebSocket
 * and JSON-RPC APIs. Cheap enough to run inside the calling process.
 *
 * Keys are derived from fixed entropy: the same payers every run, public
 * test keys (devnet only).
 */
import { createHash } from "node:crypto";
import { Wallet, type ECDSA } from "xrpl";
import { RLUSD_CURRENCY, RLUSD_ISSUER, XRPL_MAINNET_ID } from "../../src/chains/xrpl/networks.js";
import { XrplLedger } from "./ledger.js";
import { serveXrpl } from "./rpcServer.js";

export const XRPL_MAINNET = XRPL_MAINNET_ID;

export interface XrplDevnetOptions {
  /** Milliseconds per ledger close (1000 by default; mainnet closes every 3 to 5 s). */
  closeMs?: number;
  payers?: number;
  /** XRP (drops) each payer holds. Default 10,000 XRP. */
  payerDrops?: bigint;
  /** RLUSD each payer holds. Default 10,000. */
  payerRlusd?: string;
  port?: number;
}

/** What `.devnet/devnet.json` holds under `networks["xrpl:0"]`. */
interface XrplNetworkInfo {
  /** rippled JSON-RPC over HTTP (what the facilitator uses). */
  rpcUrl: string;
  /** rippled WebSocket (what the `xrpl` package's `Client` uses). */
  wsUrl: string;
  /**
   * symbol → asset id as requirements name it (`asset`): "XRP", or an issued
   * currency's 160-bit code, whose issuer (`extra.issuer`) is in `issuers`.
   */
  assets: { XRP: "XRP"; RLUSD: string };
  /** symbol → issuer account of each issued currency in `assets`. */
  issuers: { RLUSD: string };
  /** Family seeds of funded payers (devnet only). */
  payerSeeds: string[];
  /** An account that can receive XRP and RLUSD, for example resource servers. */
  payTo: string;
}

export interface RunningXrpl {
  info: XrplNetworkInfo;
  ledger: XrplLedger;
  /** Test control: the WebSocket (and so the `ledger` stream) down, or back up. */
  setWebSocketDown(down: boolean): void;
  /** Connections subscribed to the `ledger` stream now. */
  ledgerSubscribers(): number;
  /** JSON-RPC calls over HTTP answered so far, by method. */
  callsServed(method: string): number;
  stop(): Promise<void>;
}

/** A devnet wallet from fixed entropy: the same keys every run (devnet only). */
/** The `xrpl` package's key algorithms (its enum is not an ESM named export). */
const ED25519 = "ed25519" as ECDSA;
const SECP256K1 = "ecdsa-secp256k1" as ECDSA;

export function devnetXrplWallet(label: string, algorithm: ECDSA = ED25519): Wallet {
  const entropy = createHash("sha256").update(`x402 devnet xrpl ${label}`).digest().subarray(0, 16);
  return Wallet.fromEntropy(entropy, { algorithm });
}

export async function startXrplLedger(opts: XrplDevnetOptions = {}): Promise<RunningXrpl> {
  const ledger = new XrplLedger();
  ledger.fund(RLUSD_ISSUER, 1_000_000_000n);
  const payTo = devnetXrplWallet("payTo");
  ledger.fund(payTo.classicAddress, 100_000_000n);
  ledger.trust(payTo.classicAddress, RLUSD_ISSUER, RLUSD_CURRENCY, "1000000000");
  const payers = Array.from({ length: opts.payers ?? 5 }, (_, i) =>
    devnetXrplWallet(`payer ${i}`, i % 2 === 0 ? SECP256K1 : ED25519),
  );
  for (const p of payers) {
    ledger.fund(p.classicAddress, opts.payerDrops ?? 10_000_000_000n);
    ledger.trust(
      p.classicAddress,
      RLUSD_ISSUER,
      RLUSD_CURRENCY,
      "1000000000",
      opts.payerRlusd ?? "10000",
    );
  }
  ledger.close();
  ledger.start(opts.closeMs ?? 1000);
  const served = await serveXrpl(ledger, opts.port ?? 0);
  return {
    ledger,
    info: {
      rpcUrl: served.rpcUrl,
      wsUrl: served.wsUrl,
      assets: { XRP: "XRP", RLUSD: RLUSD_CURRENCY },
      issuers: { RLUSD: RLUSD_ISSUER },
      payerSeeds: payers.map((p) => p.seed!),
      payTo: payTo.classicAddress,
    },
    setWebSocketDown: (down) => served.setWebSocketDown(down),
    ledgerSubscribers: () => served.ledgerSubscribers(),
    callsServed: (method) => served.callsServed(method),
    async stop() {
      ledger.stop();
      await served.close();
    },
  };
}
