/**
 * What gets signed around the confidential vault, kept in one place so the
 * service, a merchant's wallet and the contract agree byte for byte:
 *
 * - the enablement message a merchant's wallet signs (personal_sign) to prove
 *   it holds the withdrawal address's key;
 * - the slot salt and commitment derived from that signature (the salt is a
 *   secret of the merchant and us: the commitment binds the slot to the
 *   address without naming it);
 * - a payment's key, blinding and commitment to its merchant's slot (defined
 *   in src/clients/confidential/receipts.ts, which merchants' tools use too);
 * - the operator's EIP-712 attribution of a commitment to a payment, which
 *   `collect` checks, and the withdrawal request the merchant's wallet signs
 *   (the contract's ATTRIBUTION_TYPEHASH and WITHDRAW_TYPEHASH).
 */
import {
  concat,
  encodeAbiParameters,
  getAddress,
  keccak256,
  stringToHex,
  type Address,
  type Hex,
} from "viem";

const VAULT_DOMAIN_NAME = "x402 Confidential Settlement";
const VAULT_DOMAIN_VERSION = "1";

export function vaultDomain(chainId: number, vault: Address) {
  return {
    name: VAULT_DOMAIN_NAME,
    version: VAULT_DOMAIN_VERSION,
    chainId,
    verifyingContract: vault,
  } as const;
}

/** The operator's word that a commitment goes with a payment (the contract's ATTRIBUTION_TYPEHASH). */
export const attributionTypes = {
  Attribution: [
    { name: "key", type: "bytes32" },
    { name: "commitment", type: "bytes32" },
  ],
} as const;

export { WITHDRAW_TYPES as withdrawTypes } from "../../confidentialPort.js";

export type { WithdrawRequest } from "../../confidentialPort.js";

/** The text a merchant's wallet signs to enable confidential settlement. */
export function enablementMessage(opts: {
  merchant: Address;
  accountRef: string;
  vault: Address;
  chainId: number;
}): string {
  return [
    "x402 confidential settlement",
    `Withdrawal address: ${getAddress(opts.merchant)}`,
    `Account: ${opts.accountRef}`,
    `Vault: ${getAddress(opts.vault)} on eip155:${opts.chainId}`,
    "This address receives every withdrawal of this account's confidential balance, permanently: nobody can change it later.",
  ].join("\n");
}

/**
 * The slot's secret salt, derived from the merchant's enablement signature.
 * An ordinary wallet signs deterministically (RFC 6979), so the merchant can
 * recover the salt by signing the same message again, without us.
 */
export function slotSalt(enablementSignature: Hex): Hex {
  return keccak256(concat([stringToHex("x402 confidential slot salt"), enablementSignature]));
}

/** What the contract stores for a slot: the address, hidden under the salt. */
export function slotCommitment(merchant: Address, salt: Hex): Hex {
  return keccak256(
    encodeAbiParameters([{ type: "address" }, { type: "bytes32" }], [getAddress(merchant), salt]),
  );
}

export {
  paymentBlinding,
  paymentCommitment,
  paymentKey,
} from "../../../clients/confidential/receipts.js";
