/**
 * NEAR `exact` payments for tests, signed with the NEAR libraries the way
 * the client scheme signs them, with any field changed before signing (to
 * build each payment a facilitator must refuse).
 */
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { KeyPairSigner } from "@near-js/signers";
import {
  actionCreators,
  buildDelegateAction,
  encodeSignedDelegate,
  Signature,
  SignedDelegate,
  type Action,
} from "@near-js/transactions";
import type { PaymentRequirements } from "@x402/core/types";
import { NEAR_MAINNET, type RunningNear } from "../../../devnet/near/index.js";
import { paymentRequest } from "../../chains/evm/payments.js";

export const TGAS = 10n ** 12n;

export interface DelegateTweaks {
  senderId?: string;
  key?: KeyPair;
  receiverId?: string;
  method?: string;
  args?: Record<string, unknown>;
  gas?: bigint;
  deposit?: bigint;
  extraActions?: Action[];
  /** Added to the key's next nonce (negative: an old one). */
  nonceOffset?: bigint;
  /** Blocks past the current head for max_block_height. */
  ahead?: bigint;
  /** Sign with this key instead of the one named (a forged signature). */
  forgedBy?: KeyPair;
}

export function nearRequirements(
  near: RunningNear,
  fields: Partial<PaymentRequirements> = {},
): PaymentRequirements {
  return {
    scheme: "exact",
    network: NEAR_MAINNET,
    asset: near.info.assets.USDC,
    amount: "10000",
    payTo: near.info.payTo,
    maxTimeoutSeconds: 60,
    extra: {},
    ...fields,
  };
}

export function payerKey(near: RunningNear, i: number): { accountId: string; key: KeyPair } {
  const p = near.info.payers[i]!;
  return { accountId: p.accountId, key: KeyPair.fromString(p.secretKey as KeyPairString) };
}

/** The base64 SignedDelegate payer `i` sends for `req`, with `tweaks` applied before signing. */
export async function signedDelegateFor(
  near: RunningNear,
  i: number,
  req: PaymentRequirements,
  tweaks: DelegateTweaks = {},
): Promise<string> {
  const payer = payerKey(near, i);
  const key = tweaks.key ?? payer.key;
  const senderId = tweaks.senderId ?? payer.accountId;
  const ak = near.ledger.accessKey(senderId, key.getPublicKey().toString());
  const da = buildDelegateAction({
    senderId,
    receiverId: tweaks.receiverId ?? req.asset,
    actions: [
      actionCreators.functionCall(
        tweaks.method ?? "ft_transfer",
        tweaks.args ?? { receiver_id: req.payTo, amount: req.amount },
        tweaks.gas ?? 30n * TGAS,
        tweaks.deposit ?? 1n,
      ),
      ...(tweaks.extraActions ?? []),
    ],
    nonce: (ak?.nonce ?? 1_000_000_000n) + 1n + (tweaks.nonceOffset ?? 0n),
    maxBlockHeight: BigInt(near.ledger.final.height) + (tweaks.ahead ?? 30n),
    publicKey: key.getPublicKey(),
  });
  const [hash, signed] = await new KeyPairSigner(key).signDelegateAction(da);
  const sd = tweaks.forgedBy
    ? new SignedDelegate({
        delegateAction: signed.delegateAction,
        signature: new Signature({
          keyType: tweaks.forgedBy.getPublicKey().keyType,
          data: tweaks.forgedBy.sign(hash).signature,
        }),
      })
    : signed;
  return Buffer.from(encodeSignedDelegate(sd)).toString("base64");
}

/** The `/verify` or `/settle` body for a NEAR payment. */
export async function nearPayment(
  near: RunningNear,
  i: number,
  req: PaymentRequirements,
  tweaks: DelegateTweaks = {},
) {
  return paymentRequest(req, {
    signedDelegateAction: await signedDelegateFor(near, i, req, tweaks),
  });
}
