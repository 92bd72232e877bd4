/** XRP Ledger payments for tests against a stack started with `families: { xrpl: {} }`. */
import type { PaymentRequirements } from "@x402/core/types";
import { XRPL_MAINNET } from "../../../devnet/xrpl/index.js";
import type { TestStack } from "../../support/stack.js";

/** An `exact` offer of `amount` drops in XRP to the stack's XRPL pay-to account, fees not sponsored. */
export function xrpRequirements(stack: TestStack, amount: string): PaymentRequirements {
  return {
    scheme: "exact",
    network: XRPL_MAINNET,
    asset: "XRP",
    amount,
    payTo: stack.families.xrpl!.info.payTo,
    maxTimeoutSeconds: 300,
    extra: { areFeesSponsored: false },
  };
}
