/**
 * The facilitator's EVM signer for one network: the port that `@x402/evm`
 * mechanisms call to read the chain, check signatures and send transactions.
 *
 * Several accounts are used in turn. viem's nonce manager hands out nonces
 * locally per account, so concurrent settles on one account pipeline instead
 * of colliding on `eth_getTransactionCount`.
 */
import type { FacilitatorEvmSigner } from "@x402/evm";
import {
  createNonceManager,
  createWalletClient,
  type Account,
  type Hex,
  type PublicClient,
  type WalletClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { jsonRpc } from "viem/nonce";
import type { EvmNetwork } from "../../networks/registry.js";
import { recoverTypedDataSigner } from "./nativeSignature.js";
import { chainFor, transportFor } from "./rpc.js";

export interface EvmSignerOptions {
  network: EvmNetwork;
  rpcUrls: readonly string[];
  publicClient: PublicClient;
  privateKeys: readonly Hex[];
  /** Bound on every receipt wait; past it the mechanism reports `settlement_pending`. */
  confirmationTimeoutMs: number;
}

export interface EvmSignerHandle {
  signer: FacilitatorEvmSigner;
  addresses: readonly `0x${string}`[];
}

export function createEvmSigner(opts: EvmSignerOptions): EvmSignerHandle {
  if (opts.privateKeys.length === 0) throw new Error(`no signer keys for ${opts.network.id}`);
  const chain = chainFor(opts.network, opts.rpcUrls);
  // One nonce manager per signer set, not viem's process-wide default: two
  // services in one process (tests) or a restarted chain must not share a
  // cached nonce.
  const nonceManager = createNonceManager({ source: jsonRpc() });
  const wallets: { account: Account; client: WalletClient }[] = opts.privateKeys.map((key) => {
    const account = privateKeyToAccount(key, { nonceManager });
    return {
      account,
      client: createWalletClient({ account, chain, transport: transportFor(opts.rpcUrls) }),
    };
  });
  const addresses = wallets.map((w) => w.account.address);
  let next = 0;
  const pick = () => {
    const w = wallets[next % wallets.length]!;
    next = (next + 1) % wallets.length;
    return w;
  };
  const pc = opts.publicClient;

  const signer: FacilitatorEvmSigner = {
    getAddresses: () => addresses,
    readContract: (args) =>
      pc.readContract({
        address: args.address,
        abi: args.abi as never,
        functionName: args.functionName as never,
        args: (args.args ?? []) as never,
      }) as Promise<unknown>,
    verifyTypedData: async (args) => {
      // Fast path: a plain EOA signature, recovered natively. A mismatch is
      // not a verdict: the signer may be a contract wallet (ERC-1271/6492),
      // which only the chain can judge.
      const recovered = recoverTypedDataSigner(args);
      if (recovered && recovered.toLowerCase() === args.address.toLowerCase()) return true;
      return pc.verifyTypedData({
        address: args.address,
        domain: args.domain as never,
        types: args.types as never,
        primaryType: args.primaryType as never,
        message: args.message as never,
        signature: args.signature,
      });
    },
    writeContract: async (args) => {
      const w = pick();
      return w.client.writeContract({
        account: w.account,
        chain,
        address: args.address,
        abi: args.abi as never,
        functionName: args.functionName as never,
        args: args.args as never,
        ...(args.gas !== undefined ? { gas: args.gas } : {}),
        ...(args.dataSuffix ? { dataSuffix: args.dataSuffix } : {}),
      } as never);
    },
    sendTransaction: async (args) => {
      const w = pick();
      return w.client.sendTransaction({ account: w.account, chain, to: args.to, data: args.data });
    },
    waitForTransactionReceipt: (args) =>
      pc.waitForTransactionReceipt({
        hash: args.hash,
        timeout: args.timeout ?? opts.confirmationTimeoutMs,
      }),
    getCode: (args) => pc.getCode({ address: args.address }),
  };
  return { signer, addresses };
}
