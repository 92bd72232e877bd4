/**
 * starknet.js's `RpcProvider` for one network, with the line every family
 * draws: an answer the node gave (a JSON-RPC error with its code: contract
 * not found, contract error, invalid nonce…) is the node's verdict and
 * comes back as starknet.js's `RpcError`; anything else (unreachable,
 * timeout, HTTP 5xx, a body that is not JSON-RPC) is `ChainUnavailableError`,
 * never the payer's fault.
 */
import { RpcError, RpcProvider } from "starknet";
import { Agent, type Dispatcher } from "undici";
import { ChainUnavailableError } from "../ports.js";
import { keepAliveAgent, postForText } from "../../lib/boundedPost.js";

/** Sends one executor may have on the wire at once, in order, before the first is answered. */
const PIPELINE_DEPTH = 64;

/**
 * starknet.js's `baseFetch` over undici's `request`: Node's `fetch` builds
 * WHATWG request, response and stream objects around every call, which cost
 * more than the call on a busy service. starknet.js reads only `json()`.
 */
function undiciFetch(
  dispatcher: Dispatcher,
  timeoutMs: number,
  pipelined: boolean,
): (input: Parameters<typeof fetch>[0], init?: RequestInit) => Promise<Response> {
  return async (input, init) => {
    const answer = await postForText(String(input), {
      dispatcher,
      headers: { "content-type": "application/json" },
      body: typeof init?.body === "string" ? init.body : null,
      signal: AbortSignal.timeout(timeoutMs),
      pipelined,
    });
    if (answer.status >= 500) throw new Error(`HTTP ${answer.status}`);
    return {
      ok: true,
      status: answer.status,
      json: async () => JSON.parse(answer.text) as unknown,
    } as Response;
  };
}

export interface StarknetRpcOptions {
  network: string;
  url: string;
  chainId: string;
  timeoutMs?: number;
}

export class StarknetRpc {
  readonly host: string;
  readonly provider: RpcProvider;
  /**
   * The same node over one connection whose requests leave in the order they
   * are made (HTTP pipelining): an executor's transactions are sent on it
   * one after another without waiting for each answer, and reach the node in
   * nonce order.
   */
  readonly inOrder: RpcProvider;
  /** When a call last failed for a transport reason (0: never). */
  lastTransportFailure = 0;

  constructor(private readonly opts: StarknetRpcOptions) {
    this.host = new URL(opts.url).host;
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const provider = (dispatcher: Dispatcher, pipelined: boolean) =>
      new RpcProvider({
        nodeUrl: opts.url,
        // Known up front: no starknet_chainId round trip, and a node on another chain fails loudly.
        chainId: opts.chainId as never,
        specVersion: "0.10.0",
        baseFetch: undiciFetch(dispatcher, timeoutMs, pipelined),
      });
    this.provider = provider(keepAliveAgent(), false);
    this.inOrder = provider(
      new Agent({ connections: 1, pipelining: PIPELINE_DEPTH, keepAliveTimeout: 30_000 }),
      true,
    );
  }

  /** Runs provider calls; a transport failure becomes `ChainUnavailableError`. */
  ask<T>(read: (provider: RpcProvider) => Promise<T>): Promise<T> {
    return this.through(this.provider, read);
  }

  /**
   * As `ask`, on the in-order connection: a request made here leaves before
   * any made after it (it is written when `call` is made, not later).
   */
  askInOrder<T>(call: (provider: RpcProvider) => Promise<T>): Promise<T> {
    return this.through(this.inOrder, call);
  }

  private async through<T>(
    provider: RpcProvider,
    read: (provider: RpcProvider) => Promise<T>,
  ): Promise<T> {
    try {
      return await read(provider);
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
