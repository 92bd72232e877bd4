/**
 * Places the confidential settlement vault on the devnet's `eip155:8453`
 * chain: the fhEVM host contracts first (devnet/fhevm.ts), then the vault's
 * runtime code at its fixed address, initialized with the devnet USDC, the
 * devnet operator and receipt-signer keys, and the host's addresses.
 *
 * Idempotent: on a kept chain that already has the vault nothing happens,
 * so a restart keeps every slot and balance.
 */
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  http,
  parseEther,
  type Address,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { Artifacts } from "./compile.js";
import { FHEVM_HOST, placeFhevmHost } from "./fhevm.js";
import { devnetConfidentialOperatorKey, devnetReceiptSignerKey } from "./keys.js";

/** Where the devnet keeps the vault: fixed, so a resource server's configuration never changes. */
const CONFIDENTIAL_VAULT_ADDRESS: Address = "0x4020C0F1De000000000000000000000000000008";

/** The only network with a confidential vault (spec 2.7). */
export const CONFIDENTIAL_NETWORK_ID = "eip155:8453";

export interface DevnetConfidentialInfo {
  /** The vault (the confidential `payTo`). */
  contractAddress: Address;
  operatorPrivateKey: Hex;
  receiptSignerPrivateKey: Hex;
}

const RECEIPT_TIMEOUT_MS = 60_000;

export async function placeConfidentialVault(opts: {
  rpcUrl: string;
  chainId: number;
  artifacts: Artifacts;
  usdc: Address;
}): Promise<DevnetConfidentialInfo> {
  const info: DevnetConfidentialInfo = {
    contractAddress: CONFIDENTIAL_VAULT_ADDRESS,
    operatorPrivateKey: devnetConfidentialOperatorKey(),
    receiptSignerPrivateKey: devnetReceiptSignerKey(),
  };
  const chain = defineChain({
    id: opts.chainId,
    name: `chain ${opts.chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [opts.rpcUrl] } },
  });
  const transport = http(opts.rpcUrl, { retryCount: 0 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  const artifact = opts.artifacts["ConfidentialSettlementVault"];
  if (!artifact)
    throw new Error("ConfidentialSettlementVault is missing from the compiled artifacts");
  const code = await publicClient.getCode({ address: CONFIDENTIAL_VAULT_ADDRESS });
  if (code && code !== "0x") {
    // A kept chain from before a change of the vault: its storage is laid
    // out for the old code, so neither can be kept alongside the other.
    if (code.toLowerCase() !== artifact.deployedBytecode.toLowerCase()) {
      throw new Error(
        "the kept devnet chain holds an older confidential vault; start from a fresh devnet state (remove the kept chain) to use this one",
      );
    }
    return info;
  }

  await placeFhevmHost(opts.rpcUrl, opts.chainId);

  const testClient = createTestClient({ chain, transport, mode: "anvil" });
  const operator = privateKeyToAccount(info.operatorPrivateKey);
  const receiptSigner = privateKeyToAccount(info.receiptSignerPrivateKey);
  await Promise.all([
    testClient.setCode({
      address: CONFIDENTIAL_VAULT_ADDRESS,
      bytecode: artifact.deployedBytecode,
    }),
    testClient.setBalance({ address: operator.address, value: parseEther("1000") }),
  ]);
  const wallet = createWalletClient({ chain, transport, account: operator });
  const hash = await wallet.writeContract({
    address: CONFIDENTIAL_VAULT_ADDRESS,
    abi: artifact.abi,
    functionName: "initialize",
    args: [
      opts.usdc,
      operator.address,
      receiptSigner.address,
      {
        ACLAddress: FHEVM_HOST.acl,
        CoprocessorAddress: FHEVM_HOST.executor,
        KMSVerifierAddress: FHEVM_HOST.kmsVerifier,
      },
    ],
    gas: 500_000n,
  });
  if (!(await testClient.getAutomine())) await testClient.mine({ blocks: 1 });
  const receipt = await publicClient.waitForTransactionReceipt({
    hash,
    timeout: RECEIPT_TIMEOUT_MS,
  });
  if (receipt.status !== "success") throw new Error(`vault initialize reverted (${hash})`);
  return info;
}
