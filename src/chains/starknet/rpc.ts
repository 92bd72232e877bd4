/**
 * starknet.js's `RpcProvider` for one network, with the line every family
 * draws: an answer the node gave (a JSON-RPC error with its code: contract
 * not found, contract error, invalid nonce…) is the node's verdict and
 * comes back as starknet.js's `RpcError`; anything else (unreachable,
 * timeout, HTTP 5xx, a body that is not JSON-RPC) is `ChainUnavailableError`,
 * never the payer's fault.
 */
import { RpcError, RpcProvider } from "starknet";
import { ChainUnavailableError } from "../ports.js";

export interface StarknetRpcOptions {
  network: string;
  url: string;
  chainId: string;
  timeoutMs?: number;
}

export class StarknetRpc {
  readonly host: string;
  readonly provider: RpcProvider;
  /** When a call last failed for a transport reason (0: never). */
  lastTransportFailure = 0;

  constructor(private readonly opts: StarknetRpcOptions) {
    this.host = new URL(opts.url).host;
    const timeoutMs = opts.timeoutMs ?? 10_000;
    this.provider = new RpcProvider({
      nodeUrl: opts.url,
      // Known up front: no starknet_chainId round trip, and a node on another chain fails loudly.
      chainId: opts.chainId as never,
      specVersion: "0.10.0",
      baseFetch: (input: Parameters<typeof fetch>[0], init?: RequestInit) =>
        fetch(input, { ...init, signal: AbortSignal.timeout(timeoutMs) }),
    });
  }

  /** Runs provider calls; a transport failure becomes `ChainUnavailableError`. */
  async ask<T>(read: (provider: RpcProvider) => Promise<T>): Promise<T> {
    try {
      return await read(this.provider);
    } catch (e) {
      if (e instanceof RpcError) throw e;
      this.lastTransportFailure = Date.now();
      throw new ChainUnavailableError(
        this.opts.network,
        `the ${this.opts.network} RPC (${this.host}) could not be reached: ${(e as Error).message.split("\n")[0]}`,
        { cause: e },
      );
    }
  }
}

/** The node's JSON-RPC error code, when `e` is the node's own answer. */
export function rpcErrorCode(e: unknown): number | undefined {
  return e instanceof RpcError ? e.code : undefined;
}

/** Codes of the Starknet JSON-RPC specification this family branches on. */
export const RpcCode = {
  contractNotFound: 20,
  entrypointNotFound: 21,
  txnHashNotFound: 29,
  contractError: 40,
  transactionExecutionError: 41,
  invalidTransactionNonce: 52,
  insufficientResources: 53,
  insufficientAccountBalance: 54,
  validationFailure: 55,
  duplicateTx: 59,
} as const;
