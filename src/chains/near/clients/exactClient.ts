/**
 * Paying with NEAR `exact`, for the customers of a resource server (no
 * official NEAR client is published): an `@x402/core` client scheme that
 * signs an NEP-366 delegate action holding one `ft_transfer` of exactly the
 * amount to `payTo`, and sends it as `payload.signedDelegateAction`. The
 * payer needs no NEAR for gas: the facilitator's relayer pays it.
 *
 *   const client = new x402Client().register("near:*",
 *     new ExactNearClientScheme("alice.near", KeyPair.fromString(secret),
 *       { rpcUrl: "https://rpc.mainnet.near.org" }));
 */
import type { KeyPair } from "@near-js/crypto";
import { JsonRpcProvider } from "@near-js/providers";
import { KeyPairSigner } from "@near-js/signers";
import { actionCreators, buildDelegateAction, encodeSignedDelegate } from "@near-js/transactions";
import type {
  DefaultAsset,
  PaymentPayloadResult,
  PaymentRequirements,
  SchemeNetworkClient,
} from "@x402/core/types";
import { NEAR_USDC } from "../networks.js";

export interface ExactNearClientOptions {
  /** A NEAR JSON-RPC URL, or pass a `provider`. */
  rpcUrl?: string;
  provider?: JsonRpcProvider;
}

/** What an `ft_transfer` is given: 30 TGas, far above what it burns. */
export const FT_TRANSFER_GAS = 30_000_000_000_000n;

/** USDC is a dollar stablecoin, so `x402Client`'s dollar spend cap applies to it. */
export function findNearDefaultAsset(asset: string, network: string): DefaultAsset | undefined {
  if (!network.startsWith("near:")) return undefined;
  return asset === NEAR_USDC ? { asset, decimals: 6, symbol: "USDC" } : undefined;
}

export class ExactNearClientScheme implements SchemeNetworkClient {
  readonly scheme = "exact";
  readonly findDefaultAsset = findNearDefaultAsset;
  private readonly provider: JsonRpcProvider;
  private readonly signer: KeyPairSigner;

  constructor(
    private readonly accountId: string,
    private readonly keyPair: KeyPair,
    options: ExactNearClientOptions,
  ) {
    if (!options.provider && !options.rpcUrl)
      throw new Error("ExactNearClientScheme needs rpcUrl or provider");
    this.provider = options.provider ?? new JsonRpcProvider({ url: options.rpcUrl! });
    this.signer = new KeyPairSigner(keyPair);
  }

  async createPaymentPayload(
    x402Version: number,
    requirements: PaymentRequirements,
  ): Promise<PaymentPayloadResult> {
    const publicKey = this.keyPair.getPublicKey();
    const [key, block] = await Promise.all([
      this.provider.viewAccessKey(this.accountId, publicKey, { finality: "final" }),
      this.provider.viewBlock({ finality: "final" }),
    ]);
    const delegate = buildDelegateAction({
      senderId: this.accountId,
      receiverId: requirements.asset,
      actions: [
        actionCreators.functionCall(
          "ft_transfer",
          { receiver_id: requirements.payTo, amount: requirements.amount },
          FT_TRANSFER_GAS,
          1n,
        ),
      ],
      nonce: BigInt(key.nonce) + 1n,
      // About one block a second: the authorization lapses with maxTimeoutSeconds.
      maxBlockHeight:
        BigInt(block.header.height) +
        BigInt(Math.max(1, Math.ceil(requirements.maxTimeoutSeconds))),
      publicKey,
    });
    const [, signed] = await this.signer.signDelegateAction(delegate);
    return {
      x402Version,
      payload: {
        signedDelegateAction: Buffer.from(encodeSignedDelegate(signed)).toString("base64"),
      },
    };
  }
}
