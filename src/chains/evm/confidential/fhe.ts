/**
 * The FHE operations the confidential vault needs off-chain, over the
 * relayer SDK's instance interface: encrypting amounts as contract inputs
 * (with the coprocessors' input proof), public decryption with the KMS
 * proof a contract checks, and user decryption of a handle the ACL lets an
 * account read.
 *
 * Production talks to Zama's relayer and KMS through `@zama-fhe/relayer-sdk`
 * (loaded on first use: it carries two WebAssembly modules). The devnet
 * passes the mock instance of `devnet/evm/fhevm.ts`, which has the same shape.
 */
import { bytesToHex, type Address, type Hex, type LocalAccount } from "viem";

import type { FhevmInstanceLike, FhevmNetworkSettings } from "../../confidentialPort.js";

export type { FhevmInstanceLike, FhevmNetworkSettings };

interface PublicDecryption {
  /** One value per handle, in order. */
  values: (bigint | boolean | string)[];
  /** ABI-encoded cleartexts, as `FHE.checkSignatures` takes them. */
  cleartexts: Hex;
  /** The KMS signatures over them. */
  proof: Hex;
}

export interface FheClient {
  /** Encrypts amounts as `euint64` inputs that `user` may submit to `contract`, under one proof. */
  encryptAmounts(
    contract: Address,
    user: Address,
    amounts: readonly bigint[],
  ): Promise<{ handles: Hex[]; inputProof: Hex }>;
  /** Decrypts publicly decryptable handles, with the proof a contract checks. */
  publicDecrypt(handles: readonly Hex[]): Promise<PublicDecryption>;
  /** Decrypts handles of `contract` that the ACL lets `account` read. */
  userDecrypt(contract: Address, handles: readonly Hex[], account: LocalAccount): Promise<bigint[]>;
}

/** How long a user-decryption permit stays valid (the relayer's unit is days). */
const PERMIT_DAYS = 1;

export function fheClient(instance: FhevmInstanceLike): FheClient {
  return {
    async encryptAmounts(contract, user, amounts) {
      const input = instance.createEncryptedInput(contract, user);
      for (const amount of amounts) input.add64(amount);
      const { handles, inputProof } = await input.encrypt();
      return { handles: handles.map((h) => bytesToHex(h)), inputProof: bytesToHex(inputProof) };
    },
    async publicDecrypt(handles) {
      const result = await instance.publicDecrypt([...handles]);
      const byHandle = new Map(
        Object.entries(result.clearValues).map(([h, v]) => [h.toLowerCase(), v]),
      );
      return {
        values: handles.map((h) => {
          const v = byHandle.get(h.toLowerCase());
          if (v === undefined) throw new Error(`the KMS returned no value for ${h}`);
          return v;
        }),
        cleartexts: result.abiEncodedClearValues as Hex,
        proof: result.decryptionProof as Hex,
      };
    },
    async userDecrypt(contract, handles, account) {
      const { publicKey, privateKey } = instance.generateKeypair();
      const start = Math.floor(Date.now() / 1000);
      const permit = instance.createEIP712(publicKey, [contract], start, PERMIT_DAYS);
      const { EIP712Domain: _domainType, ...types } = permit.types;
      const primaryType =
        permit.primaryType ?? Object.keys(types).find((t) => t !== "EIP712Domain") ?? "";
      const signature = await account.signTypedData({
        domain: permit.domain,
        types,
        primaryType,
        message: permit.message,
      } as Parameters<LocalAccount["signTypedData"]>[0]);
      const result = await instance.userDecrypt(
        handles.map((handle) => ({ handle, contractAddress: contract })),
        privateKey,
        publicKey,
        signature.slice(2),
        [contract],
        account.address,
        start,
        PERMIT_DAYS,
      );
      const byHandle = new Map(Object.entries(result).map(([h, v]) => [h.toLowerCase(), v]));
      return handles.map((h) => {
        const v = byHandle.get(h.toLowerCase());
        if (v === undefined) throw new Error(`the KMS returned no value for ${h}`);
        return BigInt(v as bigint);
      });
    },
  };
}

/** Production: an instance of Zama's relayer SDK for the chain. */
export async function relayerFheClient(
  settings: FhevmNetworkSettings,
  chain: { chainId: number; rpcUrl: string },
): Promise<FheClient> {
  const sdk = await import("@zama-fhe/relayer-sdk/node");
  const instance = await sdk.createInstance({
    relayerUrl: settings.relayerUrl,
    network: chain.rpcUrl,
    chainId: chain.chainId,
    gatewayChainId: settings.gatewayChainId,
    aclContractAddress: settings.aclAddress,
    kmsContractAddress: settings.kmsVerifierAddress,
    inputVerifierContractAddress: settings.inputVerifierAddress,
    verifyingContractAddressDecryption: settings.decryptionAddress,
    verifyingContractAddressInputVerification: settings.inputVerificationAddress,
    ...(settings.relayerApiKey
      ? { auth: { __type: "ApiKeyHeader" as const, value: settings.relayerApiKey } }
      : {}),
  });
  return fheClient(instance as unknown as FhevmInstanceLike);
}
