/**
 * Assembles the protocol engine from built families: the official
 * `x402Facilitator` with the extensions this service advertises and every
 * family's mechanisms, fronted by `PaymentFacilitator`. The service and each
 * verify thread assemble theirs here, so both register the same things.
 */
import { x402Facilitator } from "@x402/core/facilitator";
import { BAZAAR } from "@x402/extensions/bazaar";
import { PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import { EIP2612_GAS_SPONSORING } from "@x402/extensions";
import { BuilderCodeFacilitatorExtension } from "@x402/extensions/builder-code";
import type { Logger } from "../lib/logger.js";
import type { ChainFamily, NetworkDescription } from "../chains/ports.js";
import { assetKey } from "../chains/index.js";
import { AcceptedAssets } from "./acceptedAssets.js";
import { PaymentFacilitator } from "./paymentFacilitator.js";
import type { FacilitatorSettings } from "./settings.js";

export type { FacilitatorSettings };

export function assembleFacilitator(
  families: readonly ChainFamily[],
  settings: FacilitatorSettings,
  log: Logger,
  /** The networks' settled assets (the families' and the operator's); absent: not checked. */
  networks?: readonly NetworkDescription[],
): PaymentFacilitator {
  const engine = new x402Facilitator();
  // Advertised in GET /supported; cataloging itself is a settle stage.
  engine.registerExtension(BAZAAR);
  // Advertised likewise; idempotent settle is a settle stage.
  engine.registerExtension({ key: PAYMENT_IDENTIFIER });
  // A payer's EIP-2612 permit for Permit2 rides along and the Permit2 proxy's
  // settleWithPermit spends it: gasless onboarding (the mechanisms do the work).
  engine.registerExtension(EIP2612_GAS_SPONSORING);
  // `erc20ApprovalGasSponsoring` (a payer's signed approve(Permit2) relayed
  // for tokens without EIP-2612) needs a sending signer per network, so the
  // EVM family registers it in `register` below, with one for each network.
  // ERC-8021 attribution: the mechanisms append the suffix this builds to the
  // settlement calldata, with the resource server's, the client's and our codes.
  engine.registerExtension(
    new BuilderCodeFacilitatorExtension({
      ...(settings.builderCode ? { builderCode: settings.builderCode } : {}),
      ...(settings.builderServiceCode ? { serviceCode: settings.builderServiceCode } : {}),
    }),
  );
  for (const family of families) family.register(engine);
  return new PaymentFacilitator(
    engine,
    families,
    log.child({ component: "facilitator" }),
    networks ? new AcceptedAssets(networks, assetKey) : undefined,
  );
}
