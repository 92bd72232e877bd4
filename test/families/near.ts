/**
 * NEAR `exact` with USDC, paid with this project's NEAR client scheme (no
 * official one is published). A delegate action's nonce belongs to the
 * payer's access key, so a second delegate action can carry one already
 * consumed.
 */
import { x402Client } from "@x402/core/client";
import { SCHEMA } from "@near-js/transactions";
import { deserialize } from "borsh";
import { NEAR_MAINNET } from "../../devnet/near/index.js";
import { ExactNearClientScheme } from "../../src/chains/near/clients/exactClient.js";
import { ExactNearServerScheme } from "../../src/chains/near/clients/exactServer.js";
import { payerKey, signedDelegateFor } from "../chains/near/payments.js";
import type { TestStack } from "../support/stack.js";
import { SendWatch, assembled, malformedString, usdcPrice, type FamilyAdapter } from "./adapter.js";

/** Where a racing payer's USDC goes for the race (another registered account). */
const ASIDE = 4;

/** `from` sends `amount` of its USDC to `to` with an `ft_transfer` of its own. */
function moveUsdc(stack: TestStack, from: string, to: string, amount: bigint): void {
  const running = stack.families.near!;
  running.ledger
    .token(running.info.assets.USDC)!
    .call(
      "ft_transfer",
      Buffer.from(JSON.stringify({ receiver_id: to, amount: amount.toString() })),
      { predecessor: from, deposit: 1n, view: false },
    );
}

export const near: FamilyAdapter<"near"> = {
  name: "NEAR",
  network: NEAR_MAINNET,
  namespace: "near",
  stack: { families: { near: {} } },
  sendCall: '"send_tx"',
  reasons: {
    replay: "invalid_exact_near_nonce",
    amount: "invalid_exact_near_amount",
    payTo: "invalid_exact_near_recipient",
  },
  // Wrapped NEAR: a real NEP-141 token, not one the service settles.
  unlistedAsset: "wrap.near",
  malformedPayloads: malformedString("signedDelegateAction", "base64"),
  registerServer: (server) => server.register(NEAR_MAINNET, new ExactNearServerScheme()),
  // Registered with the token: a transfer to an unregistered account fails.
  payTo: (stack) => stack.families.near!.info.payTo,
  price: usdcPrice,
  client: async (stack, i) => {
    const payer = payerKey(stack.families.near!, i);
    return new x402Client().register(
      "near:*",
      new ExactNearClientScheme(payer.accountId, payer.key, {
        rpcUrl: stack.families.near!.info.rpcUrl,
      }),
    );
  },
  payer: async (stack, i) => payerKey(stack.families.near!, i).accountId,
  balanceOf: async (stack, account) =>
    stack.families.near!.ledger.token(stack.families.near!.info.assets.USDC)!.balanceOf(account),
  // The NEP-141 `ft_transfer` events its receipts logged, the token being the receipt's executor.
  async transfersOf(stack, hash) {
    const record = stack.families.near!.ledger.transaction(hash);
    if (!record) return undefined;
    if (record.height === undefined) return { failure: "not in a block" };
    return {
      transfers: (record.receiptsOutcome ?? []).flatMap(({ outcome }) =>
        outcome.logs.flatMap((log) => {
          if (!log.startsWith("EVENT_JSON:")) return [];
          const event = JSON.parse(log.slice("EVENT_JSON:".length)) as {
            standard?: string;
            event?: string;
            data?: { old_owner_id: string; new_owner_id: string; amount: string }[];
          };
          if (event.standard !== "nep141" || event.event !== "ft_transfer") return [];
          return (event.data ?? []).map((d) => ({
            from: d.old_owner_id,
            to: d.new_owner_id,
            asset: outcome.executor_id,
            amount: BigInt(d.amount),
          }));
        }),
      ),
    };
  },
  async signReusingNonce(stack, i, first, requirements) {
    const used = delegateNonce(first);
    const payer = payerKey(stack.families.near!, i);
    const key = stack.families.near!.ledger.accessKey(
      payer.accountId,
      payer.key.getPublicKey().toString(),
    )!;
    // signedDelegateFor signs the key's next nonce plus an offset: aim it back at the used one.
    const signedDelegateAction = await signedDelegateFor(stack.families.near!, i, requirements, {
      nonceOffset: used - (key.nonce + 1n),
    });
    const second = assembled(first, requirements, { signedDelegateAction });
    if (delegateNonce(second) !== used) throw new Error("the second delegate missed the nonce");
    return second;
  },
  payerRace: {
    signers: "relayers",
    unit: "yoctoNEAR",
    reason: "insufficient_funds",
    feeKnownBeforeSending: false,
    // Its `ft_transfer` carries 1 yoctoNEAR, which goes back to the payer.
    lostBeyondFee: 1n,
    // Room for one transaction in flight at its worst fee (the client's 30
    // TGas plus 10 TGas for the receipts, at the ledger's gas price of
    // 100,000,000 yoctoNEAR, and the 1 yoctoNEAR deposit: 0.004 NEAR), not
    // for one more once a failure has burnt its gas (0.00032 NEAR).
    budget: { env: { NEAR_FAILED_FEE_BUDGET_NEAR: "0.0042" }, native: 0.0042 },
    watchSends(stack) {
      const watch = new SendWatch();
      const ledger = stack.families.near!.ledger;
      const submit = ledger.submit.bind(ledger);
      ledger.submit = (base64) =>
        watch.take(
          () => submit(base64),
          (hash) => hash,
        );
      return watch;
    },
    signersBalance: async (stack) => {
      const running = stack.families.near!;
      return running.info.relayers.reduce(
        (sum, r) => sum + running.ledger.balance(r.accountId),
        0n,
      );
    },
    // Played as its own `ft_transfer` to another account just before the ledger takes ours.
    async funds(stack, i) {
      const owner = await near.payer(stack, i);
      const aside = await near.payer(stack, ASIDE);
      const held = await near.balanceOf(stack, owner);
      return {
        take: () => moveUsdc(stack, owner, aside, held),
        giveBack: () => moveUsdc(stack, aside, owner, held),
      };
    },
  },
};

function delegateNonce(payment: { payload: Record<string, unknown> }): bigint {
  const bytes = Buffer.from(String(payment.payload["signedDelegateAction"]), "base64");
  const decoded = deserialize(SCHEMA.SignedDelegate, new Uint8Array(bytes)) as {
    delegateAction: { nonce: bigint | number };
  };
  return BigInt(decoded.delegateAction.nonce);
}
