/**
 * What the code at a settlement's payer means for what we send for it.
 *
 * A payer whose address carries code (an ERC-1271 wallet, an EOA with an
 * EIP-7702 delegation) runs that code inside our transaction, at our cost.
 * Two things follow from it:
 * - the contract-wallet signature allowance (gasCeilings.ts) is granted
 *   only to code we have reason to trust: a known wallet implementation
 *   (`EVM_KNOWN_WALLET_IMPLEMENTATIONS`), or a payer with a settled payment
 *   on record. Unknown code at a first-time payer gets the shape's own
 *   ceiling, as an account without code does, so a burst of such payers
 *   costs at most what ordinary payers' failures cost;
 * - as the failed-fee budget runs low, payers with code are refused before
 *   payers without (failedFeeBudget.ts).
 * An account without code needs no allowance (its check is `ecrecover`)
 * and keeps the full ceiling, which on some rollups also carries the L1
 * part of the fee in gas units.
 *
 * A wallet's implementation is where its logic lives: the delegate an
 * EIP-7702 designator names, else the ERC-1967 implementation slot (smart
 * wallet proxies such as Coinbase Smart Wallet's), else the address itself.
 */
import { getAddress, type Hex, type PublicClient } from "viem";
import type { CodeCache } from "../rpc/codeCache.js";

export interface PayerCode {
  /** The payer's address carries code. */
  readonly hasCode: boolean;
  /** Its signature check may take the contract-wallet allowance. */
  readonly signatureAllowance: boolean;
}

/** Nothing known of the payer (a send outside a settlement's payment): as before, no refusal for code. */
export const UNKNOWN_PAYER_CODE: PayerCode = { hasCode: false, signatureAllowance: true };

/** ERC-1967's implementation slot: keccak256("eip1967.proxy.implementation") - 1. */
const ERC1967_IMPLEMENTATION_SLOT =
  "0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc";
/** An EIP-7702 delegation designator: 0xef0100 followed by the delegate's 20 bytes. */
const DELEGATION = /^0xef0100([0-9a-f]{40})$/i;

export class PayerCodeReader {
  private readonly known: ReadonlySet<string>;

  constructor(
    private readonly client: Pick<PublicClient, "getStorageAt">,
    private readonly codes: Pick<CodeCache, "get">,
    knownImplementations: readonly string[],
  ) {
    this.known = new Set(knownImplementations.map((a) => a.toLowerCase()));
  }

  /**
   * The payer's code and what it is granted. `payerKnown`: whether it has
   * a settled payment on record (undefined: not read, treated as known).
   */
  async of(payer: string, payerKnown: boolean | undefined): Promise<PayerCode> {
    const address = getAddress(payer);
    // The code was read moments ago, at verify (the cache holds it); should
    // this read fail, the send keeps the rule every payer had before: the
    // shape's full ceiling, which still bounds what one failure costs.
    const code = await this.codes.get(address).catch(() => undefined);
    if (!code || code === "0x") return { hasCode: false, signatureAllowance: true };
    if (payerKnown !== false) return { hasCode: true, signatureAllowance: true };
    const implementation = await this.implementationOf(address, code);
    return { hasCode: true, signatureAllowance: this.known.has(implementation) };
  }

  private async implementationOf(address: Hex, code: Hex): Promise<string> {
    const delegated = DELEGATION.exec(code);
    if (delegated) return `0x${delegated[1]!.toLowerCase()}`;
    const slot = await this.client
      .getStorageAt({ address, slot: ERC1967_IMPLEMENTATION_SLOT })
      // An unreadable slot proves nothing: the wallet is then judged by its own address.
      .catch(() => undefined);
    if (slot && BigInt(slot) !== 0n) return `0x${slot.slice(-40).toLowerCase()}`;
    return address.toLowerCase();
  }
}
