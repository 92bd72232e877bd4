/**
 * What the family suites (one delivery, outages, hostile input, hostile
 * payers) and the chaos run need of a chain family: how to run its ledger
 * and put a failing proxy in front of it, how a resource server built with
 * the official packages accepts it, how a payer pays it, how to read what
 * the ledger holds (balances, and what a transaction moved), and what the
 * family refuses hostile payments with. Adding a family to the suites and
 * to the chaos run is one adapter in this folder and one line in index.ts,
 * whose table does not compile without it.
 */
import type { x402Client } from "@x402/core/client";
import type { x402ResourceServer } from "@x402/core/server";
import type { Network, PaymentPayload, PaymentRequirements, Price } from "@x402/core/types";
import type { Namespace } from "../../src/chains/index.js";
import type { StackOptions, TestStack } from "../support/stack.js";

/** One move of an asset that a transaction made, as the ledger recorded it. */
export interface LedgerTransfer {
  from: string;
  to: string;
  asset: string;
  amount: bigint;
}

/** What a transaction the ledger holds did: it failed there, or made these transfers. */
export type LedgerOutcome = { failure: string } | { transfers: LedgerTransfer[] };

export interface FamilyAdapter<N extends Namespace = Namespace> {
  /** Names the family in test titles. */
  readonly name: string;
  readonly network: Network;
  /** What `startStack` needs to run this family's ledger next to the service. */
  readonly stack: StackOptions;
  /** The family's namespace: its key in index.ts, and where `withRpcUrl` puts the hook in front of its RPC. */
  readonly namespace: N;
  /**
   * What the service sends the node to broadcast a settlement (matched in
   * the JSON-RPC body): the proxy loses the answer to it. Absent where no
   * lost answer is tested.
   */
  readonly sendCall?: string;
  /** What the family refuses each hostile payment with. */
  readonly reasons: {
    /** A replay of a consumed authorization. */
    readonly replay: string;
    /** A payment signed for another amount than the requirements ask. */
    readonly amount: string;
    /** A payment signed to another recipient than the requirements' payTo. */
    readonly payTo: string;
  };
  /** An asset written as the family writes assets, that the service does not list. */
  readonly unlistedAsset: string;
  /** Payloads the service must refuse with a 400 naming the field, made from a valid one. */
  readonly malformedPayloads: readonly MalformedPayload[];
  /** Registers the family's server scheme, as a resource server would. */
  registerServer(server: x402ResourceServer): x402ResourceServer;
  /** The recipient a route names: an account the ledger can credit. */
  payTo(stack: TestStack): string;
  /** A route's price of `atomic` units of the asset the family's route asks for. */
  price(atomic: bigint): Price;
  /** Payer `i`'s client, registered with the family's client scheme. */
  client(stack: TestStack, i: number): Promise<x402Client>;
  /** Payer `i`'s address as the family writes it. */
  payer(stack: TestStack, i: number): Promise<string>;
  /** What `address` holds of the asset the routes ask for, in atomic units. */
  balanceOf(stack: TestStack, address: string): Promise<bigint>;
  /**
   * What `transaction` did, read from the ledger itself (the chaos run's
   * audit: each success must be exactly one transfer of its payment):
   * undefined when the ledger does not hold it (on its canonical chain).
   * Addresses as the ledger writes them: a token account is given as its
   * owner.
   */
  transfersOf(stack: TestStack, transaction: string): Promise<LedgerOutcome | undefined>;
  /**
   * What a settled transaction cost its payer beyond the price, in the same
   * units (an XRP Ledger payer pays its fee in drops). Absent: nothing, the
   * facilitator paid.
   */
  payerFee?(stack: TestStack, transaction: string): Promise<bigint>;
  /**
   * A second payment by payer `i`, for `requirements`, signed with the
   * nonce `first` consumed. Absent where a family has no nonce a second
   * signed message can carry.
   */
  signReusingNonce?(
    stack: TestStack,
    i: number,
    first: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PaymentPayload>;
  /**
   * How a payer moves its funds away between the service's checks and the
   * ledger running the service's transaction (the hostile-payer suite).
   * Absent where the family is tested elsewhere (EVM: its own suite) or
   * where such a failure costs the service nothing (the XRP Ledger's payer
   * pays its own fee).
   */
  readonly payerRace?: PayerRace;
}

/** What the hostile-payer suite needs of a family whose failed transactions cost us a fee. */
export interface PayerRace {
  /** What the service's signers are called, and the unit of their balance, in log lines. */
  readonly signers: string;
  readonly unit: string;
  /** The reason the raced settle is answered with; absent: not asserted. */
  readonly reason?: string;
  /** The fee is read from the message before sending: the journal's worst fee is the fee. */
  readonly feeKnownBeforeSending: boolean;
  /** What the signers lose to a failure beyond its journaled fee (a deposit that goes back to the payer). */
  readonly lostBeyondFee: bigint;
  /** An hourly failed-fee budget with room for one transaction in flight, not for one more after a failure. */
  readonly budget: { readonly env: Record<string, string>; readonly native: number };
  /** Counts the transactions the ledger takes from now on (their first copies). */
  watchSends(stack: TestStack): SendWatch;
  /** The service's signers' balance of the native token, as the ledger has it. */
  signersBalance(stack: TestStack): Promise<bigint>;
  /** Payer `i`'s funds: `take` moves them all away, `giveBack` returns them. */
  funds(stack: TestStack, i: number): Promise<{ take(): void; giveBack(): void }>;
}

/** The transactions a ledger took, counted once each, with a hook run before the next one. */
export class SendWatch {
  private readonly taken = new Set<string>();
  private next: (() => void) | undefined;

  count(): number {
    return this.taken.size;
  }

  /** Runs `hook` once, just before the ledger takes the next transaction. */
  beforeNext(hook: () => void): void {
    this.next = hook;
  }

  /**
   * The ledger's own intake of one transaction, wrapped: the hook runs
   * first, and `id` names what the ledger took (undefined: it refused it).
   */
  take<R>(intake: () => R, id: (result: R) => string | undefined): R {
    const hook = this.next;
    this.next = undefined;
    hook?.();
    const result = intake();
    const taken = id(result);
    if (taken !== undefined) this.taken.add(taken);
    return result;
  }
}

/**
 * The family's `startStack` options with something (a failing proxy) put in
 * front of its RPC: `rpcUrl` gets the node's URL and returns the one to use.
 */
export function withRpcUrl(
  family: FamilyAdapter,
  rpcUrl: (nodeUrl: string) => Promise<string>,
): StackOptions {
  const { namespace, stack } = family;
  if (namespace === "eip155") return { ...stack, baseRpcUrl: rpcUrl };
  return {
    ...stack,
    families: { ...stack.families, [namespace]: { ...stack.families?.[namespace], rpcUrl } },
  };
}

export interface MalformedPayload {
  /** What is wrong with it, for the test's title: "signedTxBlob missing". */
  readonly what: string;
  /** The field the 400's message names. */
  readonly field: string;
  spoil(valid: Record<string, unknown>): Record<string, unknown>;
  /** A bug the case shows and nobody fixed yet: the test runs, reported as to do. */
  readonly todo?: string;
}

/** Beyond any one transaction, within the service's body limit. */
const OVERSIZED_CHARS = 20_000;

/**
 * The malformed forms of a payload that is one encoded string, `key`:
 * missing, not a string, not in its encoding, and oversized (`todo`: the
 * oversized case's known bug).
 */
export function malformedString(
  key: string,
  encoding: "base64" | "hex",
  todo: { oversized?: string } = {},
): MalformedPayload[] {
  const field = `paymentPayload.payload.${key}`;
  const withValue = (value: unknown) => (valid: Record<string, unknown>) => ({
    ...valid,
    [key]: value,
  });
  return [
    { what: `${key} missing`, field, spoil: ({ [key]: _, ...rest }) => rest },
    { what: `${key} a number`, field, spoil: withValue(1232) },
    { what: `${key} not ${encoding}`, field, spoil: withValue(`%%not ${encoding}%%`) },
    {
      what: `${key} of ${OVERSIZED_CHARS.toLocaleString("en")} characters`,
      field,
      spoil: withValue("A".repeat(OVERSIZED_CHARS)),
      ...(todo.oversized ? { todo: todo.oversized } : {}),
    },
  ];
}

/** A dollar price for a six-decimal USDC amount, written exactly. */
export function usdcPrice(atomic: bigint): Price {
  const whole = atomic / 1_000_000n;
  const fraction = (atomic % 1_000_000n).toString().padStart(6, "0");
  return `$${whole}.${fraction}`;
}

/** The payload a client scheme's partial result becomes, as `x402Client` assembles it. */
export function assembled(
  first: PaymentPayload,
  requirements: PaymentRequirements,
  payload: Record<string, unknown>,
): PaymentPayload {
  return { ...first, accepted: requirements, payload };
}

/**
 * Whether two spellings name one address or asset: exactly, or as the same
 * number where both are hex (EVM's checksum case, Starknet's felts with or
 * without leading zeros).
 */
export function sameAddress(a: string, b: string): boolean {
  const hex = /^0x[0-9a-fA-F]+$/;
  return a === b || (hex.test(a) && hex.test(b) && BigInt(a) === BigInt(b));
}

/**
 * An address as a settlement's record spells it: hex in lower case, base58
 * and r-addresses exactly (their case is part of the address).
 */
export function recorded(id: string): string {
  return /^0x[0-9a-fA-F]+$/.test(id) ? id.toLowerCase() : id;
}
