/**
 * What a merchant's wallet does with the confidential vault on its own,
 * without the service: sign the enablement message and withdrawal requests,
 * redeem a receipt whose credit is missing (any account may send that: it
 * credits only the slot the payment is committed to), cancel a stalled
 * withdrawal, and
 * decrypt a withdrawal's confirmation through the KMS (on the devnet, its
 * own instance of the mock relayer: nothing of the service's).
 */
import { type Address, type Hex, type PrivateKeyAccount, type PublicClient } from "viem";
import { startDevnetFhevm } from "../../../devnet/evm/fhevm.js";
import { fheClient } from "../../../src/chains/evm/confidential/fhe.js";
import type { ConfidentialReceipt } from "../../../src/chains/evm/confidential/vault.js";
import { confidentialVaultAbi } from "../../../src/chains/evm/confidential/vaultAbi.js";
import { devnetWallet } from "./devnetChain.js";

export interface MerchantWallet {
  account: PrivateKeyAccount;
  /** Sends a vault call from this wallet (it pays the gas); resolves to the receipt. */
  send(
    functionName: "redeem" | "cancelWithdraw",
    args: readonly unknown[],
  ): Promise<{ status: "success" | "reverted"; gasUsed: bigint; hash: Hex }>;
  /** Redeems a receipt: its payment is credited to the slot its commitment names. */
  redeem(
    receipt: Pick<ConfidentialReceipt, "key" | "slot" | "blinding">,
  ): ReturnType<MerchantWallet["send"]>;
  cancelWithdraw(withdrawalId: bigint): ReturnType<MerchantWallet["send"]>;
}

export function merchantWallet(opts: {
  account: PrivateKeyAccount;
  rpcUrl: string;
  chainId: number;
  vault: Address;
  publicClient: PublicClient;
}): MerchantWallet {
  const wallet = devnetWallet(opts.account, opts.rpcUrl, opts.chainId);
  const send: MerchantWallet["send"] = async (functionName, args) => {
    // A fixed gas limit: a call expected to revert is still mined, so the
    // test sees the revert on-chain rather than in an estimate.
    const hash = await wallet.writeContract({
      address: opts.vault,
      abi: confidentialVaultAbi,
      functionName: functionName as "cancelWithdraw",
      args: args as [bigint],
      gas: 3_000_000n,
    });
    const receipt = await opts.publicClient.waitForTransactionReceipt({ hash });
    return { status: receipt.status, gasUsed: receipt.gasUsed, hash };
  };
  return {
    account: opts.account,
    send,
    redeem: (r) => send("redeem", [r.key, BigInt(r.slot), r.blinding]),
    cancelWithdraw: (id) => send("cancelWithdraw", [id]),
  };
}

/**
 * Decrypts a withdrawal's confirmation (its publicly decryptable "debited"
 * flag) through a KMS client of the wallet's own: true when the debit
 * happened. On the devnet the "KMS" is the mock coprocessor's knowledge of
 * encrypted inputs, shared through `cleartextFile` (in production, Zama's
 * KMS serves everyone alike).
 */
export async function decryptConfirmation(opts: {
  rpcUrl: string;
  chainId: number;
  cleartextFile: string;
  handle: Hex;
}): Promise<boolean> {
  const { rpcUrl, chainId, cleartextFile, handle } = opts;
  const running = await startDevnetFhevm({ rpcUrl, chainId, cleartextFile });
  try {
    const { values } = await fheClient(running.instance).publicDecrypt([handle]);
    return values[0] === true;
  } finally {
    running.close();
  }
}
