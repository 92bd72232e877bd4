/**
 * For merchants' own tools: the slot's money as the vault holds it,
 * decrypted with the slot's viewer key, without the operator or the service.
 *
 * At enablement the merchant's tools name a viewer: an address whose key
 * they keep and which nothing links to the merchant's wallet (a fresh key;
 * never the withdrawal wallet, since the viewer is stored on-chain with the
 * slot). The vault lets that address decrypt every pending credit and every
 * balance of the slot, from the assignment on, and no call can change it. So
 * a check that holds the viewer key compares its receipts with the credit
 * the vault really holds, whatever the service reports.
 *
 * `slotViewer` first reads `viewerOf(slot)` from the chain and refuses a key
 * that is not the slot's viewer (a service that assigned another viewer is
 * caught there), then decrypts through the fhEVM's user decryption: the KMS
 * answers only for handles the ACL lets the viewer read.
 */
import { getAddress, type Address, type Hex, type LocalAccount, type PublicClient } from "viem";
import { merchantVaultAbi } from "./receipts.js";

/** What user decryption needs: the relayer SDK's path, or the devnet's mock behind the same shape. */
export interface UserDecryptor {
  userDecrypt(contract: Address, handles: readonly Hex[], account: LocalAccount): Promise<bigint[]>;
}

export interface SlotViewer {
  /**
   * The slot's credit of `day` in the day's current attempt, as the vault
   * holds it; null when the slot is not credited in it (or already released).
   */
  credit(day: number): Promise<bigint | null>;
  /** The slot's balance (released credits, redemptions, penalties, less withdrawals). */
  balance(): Promise<bigint>;
}

export async function slotViewer(opts: {
  client: Pick<PublicClient, "readContract">;
  fhe: UserDecryptor;
  vault: Address;
  slot: bigint;
  viewer: LocalAccount;
}): Promise<SlotViewer> {
  const { client, fhe, vault, slot, viewer } = opts;
  const read = <T>(functionName: "viewerOf" | "slotDayCredit" | "slotInfo", args: unknown[]) =>
    client.readContract({
      address: vault,
      abi: merchantVaultAbi,
      functionName,
      args: args as [bigint],
    }) as Promise<T>;
  const onChain = getAddress(await read<Address>("viewerOf", [slot]));
  if (onChain !== getAddress(viewer.address)) {
    throw new Error(
      `slot ${slot}'s viewer on-chain is ${onChain}, not this key's ${viewer.address}: its credit cannot be checked with this key`,
    );
  }
  const decrypt = async (handle: Hex) => {
    if (BigInt(handle) === 0n) return 0n;
    const [value] = await fhe.userDecrypt(vault, [handle], viewer);
    return value ?? 0n;
  };
  return {
    async credit(day) {
      const handle = await read<Hex>("slotDayCredit", [slot, BigInt(day)]);
      return BigInt(handle) === 0n ? null : decrypt(handle);
    },
    async balance() {
      const [, handle] = await read<readonly [Hex, Hex, bigint, Address]>("slotInfo", [slot]);
      return decrypt(handle);
    },
  };
}
