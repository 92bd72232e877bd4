/**
 * Which payments may be settled as confidential ones (spec 4.6 rules 1-5).
 *
 * Pure: given the request, the privacy contract and the submitting account's
 * merchant record, the reason to refuse or undefined. Two mistakes would
 * cost a merchant money, so both are refused: a confidential offer credited
 * to a merchant the submitting key does not own, and a plain payment whose
 * `payTo` is the contract (it would move USDC in with no slot to credit).
 */
import { getAddress, isAddress, type Address } from "../../chains/confidentialPort.js";
import type { PaymentRequest } from "../../protocol/index.js";
import type { MerchantRecord } from "./merchants.js";

export const CONFIDENTIAL_REASONS = {
  unavailable: "confidential_unavailable",
  notAnOffer: "invalid_confidential_offer",
  network: "invalid_confidential_network",
  scheme: "invalid_confidential_scheme",
  asset: "invalid_confidential_asset",
  payTo: "invalid_confidential_pay_to",
  transferMethod: "invalid_confidential_transfer_method",
  merchant: "invalid_confidential_merchant",
  notOwned: "confidential_merchant_not_owned",
  notEnabled: "confidential_not_enabled",
} as const;

export interface Refusal {
  reason: string;
  message: string;
}

export interface ContractFacts {
  network: string;
  address: Address;
  asset: Address;
}

/** True when the requirement asks for a confidential settlement. */
export function isConfidentialOffer(request: PaymentRequest): boolean {
  return request.paymentRequirements.extra?.["confidential"] === true;
}

/** True when the payment would pay the privacy contract itself. */
export function paysContract(
  request: PaymentRequest,
  contract: ContractFacts | undefined,
): boolean {
  const payTo = request.paymentRequirements.payTo;
  return (
    contract !== undefined &&
    typeof payTo === "string" &&
    payTo.toLowerCase() === contract.address.toLowerCase()
  );
}

/** The merchant named by a confidential offer, checksummed, if it is an address. */
function offerMerchant(request: PaymentRequest): Address | undefined {
  const m = request.paymentRequirements.extra?.["merchant"];
  return typeof m === "string" && isAddress(m, { strict: false }) ? getAddress(m) : undefined;
}

export function refuseConfidential(
  request: PaymentRequest,
  contract: ContractFacts | undefined,
  merchant: MerchantRecord | undefined,
): Refusal | undefined {
  const req = request.paymentRequirements;
  if (!isConfidentialOffer(request)) {
    return paysContract(request, contract)
      ? {
          reason: CONFIDENTIAL_REASONS.notAnOffer,
          message:
            "payTo is the privacy contract but the requirement is not a confidential offer (extra.confidential, extra.merchant); nothing would credit a merchant",
        }
      : undefined;
  }
  if (!contract) {
    return {
      reason: CONFIDENTIAL_REASONS.unavailable,
      message: "confidential settlement is not available on this service",
    };
  }
  if (req.network !== contract.network) {
    return {
      reason: CONFIDENTIAL_REASONS.network,
      message: `confidential settlement runs only on ${contract.network}`,
    };
  }
  if (req.scheme !== "exact") {
    return {
      reason: CONFIDENTIAL_REASONS.scheme,
      message: "confidential settlement supports only the exact scheme",
    };
  }
  if (typeof req.asset !== "string" || req.asset.toLowerCase() !== contract.asset.toLowerCase()) {
    return {
      reason: CONFIDENTIAL_REASONS.asset,
      message: `confidential settlement supports only USDC (${contract.asset})`,
    };
  }
  if (!paysContract(request, contract)) {
    return {
      reason: CONFIDENTIAL_REASONS.payTo,
      message: `a confidential offer pays the privacy contract ${contract.address}`,
    };
  }
  if (req.extra?.["assetTransferMethod"] !== "eip3009") {
    return {
      reason: CONFIDENTIAL_REASONS.transferMethod,
      message:
        'a confidential offer is paid by EIP-3009 authorization (assetTransferMethod "eip3009")',
    };
  }
  const named = offerMerchant(request);
  if (!named) {
    return {
      reason: CONFIDENTIAL_REASONS.merchant,
      message: "extra.merchant must be the merchant's withdrawal address",
    };
  }
  if (!merchant || merchant.merchant !== named) {
    return {
      reason: CONFIDENTIAL_REASONS.notOwned,
      message:
        "extra.merchant is not the withdrawal address of the account this API key belongs to",
    };
  }
  if (merchant.slot === null) {
    return {
      reason: CONFIDENTIAL_REASONS.notEnabled,
      message: "confidential settlement is still being enabled for this merchant; retry shortly",
    };
  }
  return undefined;
}
