/**
 * What the service's signers on the stack's first network have sent (their
 * pending nonces) and hold (their ether), summed: a test compares it before
 * and after to see whether a payer made us send or spend anything.
 */
import type { Hex, PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { TestStack } from "./stack.js";

export async function signersState(stack: TestStack, client: PublicClient) {
  let nonces = 0;
  let balance = 0n;
  for (const key of stack.devnet.networks[stack.network]!.facilitatorPrivateKeys) {
    const address = privateKeyToAccount(key as Hex).address;
    nonces += await client.getTransactionCount({ address, blockTag: "pending" });
    balance += await client.getBalance({ address });
  }
  return { nonces, balance };
}
