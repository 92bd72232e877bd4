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
/** The most calls one JSON-RPC batch carries. */
const MAX_BATCH = 64;

/** What starknet.js reads of an answer: its status and `json()`. */
const answerOf = (status: number, json: unknown): Response =>
  ({ ok: true, status, json: async () => json }) as Response;

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
    return answerOf(answer.status, JSON.parse(answer.text) as unknown);
  };
}

interface Queued {
  id: unknown;
  body: string;
  resolve: (answer: Response) => void;
  reject: (e: unknown) => void;
}

/**
 * A `baseFetch` that sends the calls made in one turn of the event loop as
 * one JSON-RPC batch (one HTTP request, one answer to parse), each call
 * still answered on its own: the node's error for one call is that call's
 * `RpcError` alone. Concurrent settles ask the same node at the same moments
 * (four reads each as a payment is checked, every waiting settle's receipt
 * once a block is made), and an HTTP exchange per call cost the service more
 * CPU than the calls' JSON. A turn with one call sends it as it is.
 */
function batchingFetch(
  send: (url: string, body: string) => Promise<Response>,
): (input: Parameters<typeof fetch>[0], init?: RequestInit) => Promise<Response> {
  let queue: Queued[] = [];
  let url = "";
  const flush = () => {
    const batch: Queued[] = [];
    const ids = new Set<unknown>();
    for (const q of queue) {
      // An answer is matched to its call by id: a call without one of its own goes alone.
      if (q.id === undefined || q.id === null || ids.has(q.id)) {
        void dispatch([q]);
      } else {
        ids.add(q.id);
        batch.push(q);
      }
    }
    queue = [];
    for (let i = 0; i < batch.length; i += MAX_BATCH) void dispatch(batch.slice(i, i + MAX_BATCH));
  };
  const dispatch = async (batch: Queued[]) => {
    if (batch.length === 1) {
      const [only] = batch as [Queued];
      return send(url, only.body).then(only.resolve, only.reject);
    }
    try {
      const answers = await (await send(url, `[${batch.map((q) => q.body).join(",")}]`)).json();
      if (!Array.isArray(answers)) throw new Error("the node did not answer a JSON-RPC batch");
      const byId = new Map<unknown, unknown>();
      for (const a of answers) byId.set((a as { id?: unknown } | null)?.id, a);
      for (const q of batch) {
        const own = byId.get(q.id);
        if (own === undefined) q.reject(new Error("the node's batch answer left out a call"));
        else q.resolve(answerOf(200, own));
      }
    } catch (e) {
      for (const q of batch) q.reject(e);
    }
  };
  return (input, init) => {
    const body = typeof init?.body === "string" ? init.body : "null";
    let id: unknown;
    try {
      id = (JSON.parse(body) as { id?: unknown } | null)?.id;
    } catch {
      id = undefined;
    }
    return new Promise<Response>((resolve, reject) => {
      url = String(input);
      if (queue.length === 0) setImmediate(flush);
      queue.push({ id, body, resolve, reject });
    });
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
    const provider = (baseFetch: ReturnType<typeof undiciFetch>) =>
      new RpcProvider({
        nodeUrl: opts.url,
        // Known up front: no starknet_chainId round trip, and a node on another chain fails loudly.
        chainId: opts.chainId as never,
        specVersion: "0.10.0",
        baseFetch,
      });
    const pooled = undiciFetch(keepAliveAgent(), timeoutMs, false);
    this.provider = provider(batchingFetch((url, body) => pooled(url, { method: "POST", body })));
    this.inOrder = provider(
      undiciFetch(
        new Agent({ connections: 1, pipelining: PIPELINE_DEPTH, keepAliveTimeout: 30_000 }),
        timeoutMs,
        true,
      ),
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

/** A simulated transaction's trace, as far as this family reads it. */
export interface SimulatedTransaction {
  transaction_trace: {
    execute_invocation?: { revert_reason?: string } & Record<string, unknown>;
  } & Record<string, unknown>;
  fee_estimation: Record<string, unknown>;
}

/**
 * `starknet_simulateTransactions` of transactions exactly as they are sent
 * (signed bodies, as `Account.getSignedTransaction` makes them and
 * `invokeSignedTx` sends them), at `blockId`, with `flags`. starknet.js's
 * own `simulateTransaction` builds each transaction again from its parts;
 * this sends the very bodies, through the channel's JSON-RPC path (the
 * node's errors come back as `RpcError`), which starknet.js does not make
 * public.
 */
export function simulateAsSent(
  provider: RpcProvider,
  transactions: readonly unknown[],
  blockId: "pre_confirmed" | "latest",
  flags: readonly ("SKIP_VALIDATE" | "SKIP_FEE_CHARGE")[],
): Promise<SimulatedTransaction[]> {
  const channel = provider.channel as unknown as {
    fetchEndpoint(method: string, params: unknown): Promise<SimulatedTransaction[]>;
  };
  return channel.fetchEndpoint("starknet_simulateTransactions", {
    block_id: blockId,
    transactions,
    simulation_flags: flags,
  });
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
