/**
 * Where a confidential payment becomes money the vault knows about.
 *
 * The official `exact` mechanism (`@x402/evm`) verifies the payer's EIP-3009
 * authorization and then calls the token's `transferWithAuthorization` with
 * `to` = `payTo`. For a confidential payment `payTo` is the vault, and a
 * transfer made on the token directly would land in the vault unrecorded:
 * the vault could not tell what it was paid for, so credits could not be
 * bound to it. This signer, given to that mechanism on the vault's network,
 * sends the very same arguments to the vault's `collect` instead, which
 * executes the authorization itself and records payer, nonce, amount and
 * day, and the payment's commitment to its merchant's slot: the attribution
 * the vault client made for this payment just before (attributions.ts),
 * which the vault checks the operator signed. A payment with no attribution
 * is not sent at all (it would land unattributed: its merchant could never
 * open it). Everything else the mechanism does is untouched: its verification,
 * the token's `Transfer` event it checks in the receipt (still emitted, from
 * the payer to the vault), the reconciler's check of the same event.
 *
 * Privacy: the ERC-8021 builder-code suffix the mechanism appends can carry
 * the resource server's app code, which would name the merchant of a
 * payment whose merchant the vault exists to hide, so it is dropped from
 * every call to the vault.
 *
 * A transfer to the vault is never sent to the token: one for another token
 * throws (the payment fails; nothing is sent).
 */
import type { FacilitatorEvmSigner } from "@x402/evm";
import { concat, getAddress, isAddress, type Address, type Hex } from "viem";
import { attributionOf } from "./attributions.js";
import { paymentKey } from "./messages.js";
import { confidentialVaultAbi } from "./vaultAbi.js";

/** The vault whose payments must be collected, on the network this signer serves. */
export interface CollectingVault {
  address: Address;
}

export function collectThroughVault(
  signer: FacilitatorEvmSigner,
  vault: CollectingVault,
): FacilitatorEvmSigner {
  const vaultAddress = getAddress(vault.address);
  let asset: Promise<Address> | undefined;
  const vaultAsset = () =>
    (asset ??= (
      signer.readContract({
        address: vaultAddress,
        abi: confidentialVaultAbi,
        functionName: "asset",
      }) as Promise<Address>
    ).then(
      (a) => getAddress(a),
      (e: unknown) => {
        asset = undefined; // read again next time
        throw e;
      },
    ));
  return {
    ...signer,
    async writeContract(args) {
      const to = args.args?.[1];
      if (
        args.functionName !== "transferWithAuthorization" ||
        typeof to !== "string" ||
        !isAddress(to, { strict: false }) ||
        getAddress(to) !== vaultAddress
      ) {
        return signer.writeContract(args);
      }
      if (getAddress(args.address) !== (await vaultAsset())) {
        throw new Error(
          `a transfer to the confidential vault must be of its asset, not ${args.address}`,
        );
      }
      const from = args.args?.[0];
      const nonce = args.args?.[5];
      if (
        typeof from !== "string" ||
        !isAddress(from, { strict: false }) ||
        typeof nonce !== "string"
      ) {
        throw new Error("a transfer to the confidential vault must name its payer and nonce");
      }
      const attribution = attributionOf(vaultAddress, paymentKey(getAddress(from), nonce as Hex));
      if (!attribution) {
        throw new Error(
          "this confidential payment was not attributed to its merchant's slot; nothing was sent",
        );
      }
      // Same arguments, either signature form (v/r/s or bytes), then the
      // attribution; no suffix.
      return signer.writeContract({
        address: vaultAddress,
        abi: confidentialVaultAbi,
        functionName: "collect",
        args: [...args.args!, concat([attribution.commitment, attribution.signature])],
        ...(args.gas !== undefined ? { gas: args.gas } : {}),
      });
    },
  };
}
