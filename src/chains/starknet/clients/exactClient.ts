/**
 * Paying with Starknet `exact`, for the customers of a resource server (no
 * official Starknet client is published): an `@x402/core` client scheme
 * that builds the SNIP-9 v2 outside execution a requirement asks for (one
 * USDC `transfer` to `payTo`, `Caller` = `extra.feePayer` or `extra.caller`,
 * a random nonce, valid from 1 until `now + maxTimeoutSeconds`) and signs
 * its SNIP-12 typed data with the payer's starknet.js `Account`. The payer pays no fee: the
 * facilitator's executor submits it.
 *
 *   const client = new x402Client().register("starknet:*",
 *     new ExactStarknetClientScheme(new Account({ provider, address, signer: privateKey })));
 */
import { outsideExecution, stark, type Signature, type TypedData } from "starknet";
import type {
  DefaultAsset,
  PaymentPayloadResult,
  PaymentRequirements,
  SchemeNetworkClient,
} from "@x402/core/types";
import { findStarknetNetwork } from "../networks.js";

/** What the scheme needs of a payer: its address and SNIP-12 signing (a starknet.js `Account`). */
export interface StarknetPayer {
  readonly address: string;
  signMessage(typedData: TypedData): Promise<Signature>;
}

export interface ExactStarknetClientOptions {
  /** Seconds since the epoch (tests move the clock). */
  now?: () => number;
}

const ANY_CALLER = 0x414e595f43414c4c4552n;
const U128 = 1n << 128n;

/** USDC is a dollar stablecoin: `x402Client`'s dollar spend cap applies to it. */
export function findStarknetDefaultAsset(asset: string, network: string): DefaultAsset | undefined {
  const usdc = findStarknetNetwork(network)?.assets.find(
    (a) => BigInt(a.address) === BigInt(asset),
  );
  return usdc ? { asset, decimals: usdc.decimals, symbol: usdc.symbol } : undefined;
}

/**
 * The executor a requirement binds as `Caller`: `extra.feePayer`, or
 * `extra.caller` (the foundation's merged scheme spells it so, next to
 * `areFeesSponsored`). The two name the same account; a requirement that
 * gives both must give it once.
 */
export function callerOf(requirements: PaymentRequirements, payer: string): bigint {
  const extra = requirements.extra ?? {};
  if (extra["areFeesSponsored"] !== undefined && extra["areFeesSponsored"] !== true) {
    throw new Error("extra.areFeesSponsored is not true: only sponsored payments are signed here");
  }
  const named = (["feePayer", "caller"] as const).flatMap((field) => {
    const v = extra[field];
    if (v === undefined) return [];
    if (typeof v !== "string" || !/^0x[0-9a-fA-F]{1,64}$/.test(v)) {
      throw new Error(`extra.${field} must be the facilitator's executor address`);
    }
    return [BigInt(v)];
  });
  const [caller] = named;
  if (caller === undefined) {
    throw new Error(
      "the requirements carry neither extra.feePayer nor extra.caller: the facilitator's /supported gives them",
    );
  }
  if (named.some((c) => c !== caller)) {
    throw new Error("extra.feePayer and extra.caller name different accounts");
  }
  if (caller === 0n || caller === ANY_CALLER || caller === BigInt(payer)) {
    throw new Error("the caller must be the facilitator's executor, never ANY_CALLER or the payer");
  }
  return caller;
}

/** The SNIP-12 typed data of the outside execution a requirement asks for. */
export function outsideExecutionFor(
  payer: string,
  requirements: PaymentRequirements,
  opts: { nonce: string; nowSeconds: number },
): TypedData {
  const network = findStarknetNetwork(requirements.network);
  if (!network) throw new Error(`${requirements.network} is not a Starknet network served here`);
  const caller = callerOf(requirements, payer);
  const amount = BigInt(requirements.amount);
  return outsideExecution.getTypedData(
    network.chainId,
    {
      caller: `0x${caller.toString(16)}`,
      execute_after: "0x1",
      execute_before: `0x${(opts.nowSeconds + requirements.maxTimeoutSeconds).toString(16)}`,
    },
    opts.nonce,
    [
      {
        contractAddress: requirements.asset,
        entrypoint: "transfer",
        calldata: [
          requirements.payTo,
          `0x${(amount % U128).toString(16)}`,
          `0x${(amount / U128).toString(16)}`,
        ],
      },
    ],
    "2",
  );
}

export class ExactStarknetClientScheme implements SchemeNetworkClient {
  readonly scheme = "exact";
  readonly findDefaultAsset = findStarknetDefaultAsset;

  constructor(
    private readonly payer: StarknetPayer,
    private readonly options: ExactStarknetClientOptions = {},
  ) {}

  async createPaymentPayload(
    x402Version: number,
    requirements: PaymentRequirements,
  ): Promise<PaymentPayloadResult> {
    const typedData = outsideExecutionFor(this.payer.address, requirements, {
      nonce: stark.randomAddress(),
      nowSeconds: this.options.now?.() ?? Math.floor(Date.now() / 1000),
    });
    const signature = stark.formatSignature(await this.payer.signMessage(typedData));
    return {
      x402Version,
      payload: { from: this.payer.address, outsideExecution: { typedData, signature } },
    };
  }
}
