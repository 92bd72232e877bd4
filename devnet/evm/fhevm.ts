/**
 * Zama's fhEVM on the devnet, without Hardhat: the host contracts (ACL,
 * FHEVMExecutor, KMSVerifier, InputVerifier, HCULimit) from the
 * `@fhevm/host-contracts` artifacts are placed with `anvil_setCode` at the
 * addresses compiled into them, and the mock coprocessor and KMS of
 * `@fhevm/mock-utils` run in-process, answering what Zama's relayer answers
 * in production (input proofs, public and user decryptions).
 *
 * Invariants:
 *   - The host contracts' cross-references are constants in their bytecode,
 *     so they can only live at those addresses; `placeFhevmHost` checks the
 *     executor agrees before anything uses it.
 *   - The mock coprocessor computes every ciphertext's cleartext from the
 *     executor's events; the cleartexts of encrypted inputs exist only in the
 *     proof request, so they are appended to `cleartextFile` (when given) and
 *     read back on start: a kept devnet chain stays decryptable across a
 *     restart. Events are replayed from block 0 for the same reason.
 *   - ethers' block-number cache is off: a cached number made the
 *     coprocessor miss the events of the latest block.
 *   - The KMS and coprocessor signer keys are public devnet keys (keys.ts).
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  getAddress,
  http,
  pad,
  parseEther,
  type Abi,
  type Address,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { FhevmInstanceLike } from "../../src/chains/evm/confidential/fhe.js";
import { devnetCoprocessorSignerKey, devnetFhevmHostOwnerKey, devnetKmsSignerKey } from "./keys.js";

const require = createRequire(import.meta.url);

/** Where the host contracts' own bytecode says each of them lives. */
export const FHEVM_HOST = {
  acl: "0x50157CFfD6bBFA2DECe204a89ec419c23ef5755D",
  executor: "0xe3a9105a3a932253A70F126eb1E3b589C643dD24",
  kmsVerifier: "0x901F8942346f7AB3a01F6D7613119Bca447Bb030",
  inputVerifier: "0x36772142b74871f255CbD7A3e89B401d3e45825f",
  hcuLimit: "0x233ff88A48c172d29F675403e6A8e302b0F032D9",
} as const satisfies Record<string, Address>;

/**
 * The gateway side the signatures are bound to (EIP-712 domains of the KMS
 * and coprocessor signatures). On the devnet nothing runs there; these are
 * the values Zama's own mock setup uses.
 */
const FHEVM_GATEWAY = {
  chainId: 10901,
  decryption: "0x5ffdaAB0373E62E2ea2944776209aEf29E631A64",
  inputVerification: "0x812b06e1CDCE800494b79fFE4f925A504a9A9810",
} as const;

type HostContract = "ACL" | "FHEVMExecutor" | "KMSVerifier" | "InputVerifier" | "HCULimit";

const ADDRESS_OF: Record<HostContract, Address> = {
  ACL: FHEVM_HOST.acl,
  FHEVMExecutor: FHEVM_HOST.executor,
  KMSVerifier: FHEVM_HOST.kmsVerifier,
  InputVerifier: FHEVM_HOST.inputVerifier,
  HCULimit: FHEVM_HOST.hcuLimit,
};

function hostArtifact(name: HostContract): { abi: Abi; deployedBytecode: Hex } {
  return require(`@fhevm/host-contracts/artifacts/contracts/${name}.sol/${name}.json`) as {
    abi: Abi;
    deployedBytecode: Hex;
  };
}

/** OpenZeppelin's ERC-7201 slots (upgradeable Ownable and Initializable). */
const OWNABLE_SLOT = "0x9016d09d72d40fdae2fd8ceac6b6234c7706214fd39c1cd1e609a0528c199300";
const INITIALIZABLE_SLOT = "0xf0c57e16840df040f15088dc2f81fe391c3923bec73e23a9662efc9c229c6a00";

const RECEIPT_TIMEOUT_MS = 60_000;

/**
 * Places and initializes the fhEVM host contracts on an anvil chain. Safe to
 * call on a chain that already has them (a kept devnet): then it does nothing.
 */
export async function placeFhevmHost(rpcUrl: string, chainId: number): Promise<void> {
  const chain = defineChain({
    id: chainId,
    name: `chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const transport = http(rpcUrl, { retryCount: 0 });
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 50 });
  const testClient = createTestClient({ chain, transport, mode: "anvil" });
  const owner = privateKeyToAccount(devnetFhevmHostOwnerKey());
  const wallet = createWalletClient({ chain, transport, account: owner });

  const existing = await publicClient.getCode({ address: FHEVM_HOST.kmsVerifier });
  if (existing && existing !== "0x") return;

  const names = Object.keys(ADDRESS_OF) as HostContract[];
  await Promise.all([
    testClient.setBalance({ address: owner.address, value: parseEther("10") }),
    ...names.map((name) =>
      testClient.setCode({
        address: ADDRESS_OF[name],
        bytecode: hostArtifact(name).deployedBytecode,
      }),
    ),
  ]);
  const executorAbi = hostArtifact("FHEVMExecutor").abi;
  const [acl, hcu, input] = await Promise.all(
    ["getACLAddress", "getHCULimitAddress", "getInputVerifierAddress"].map(
      (functionName) =>
        publicClient.readContract({
          address: FHEVM_HOST.executor,
          abi: executorAbi,
          functionName,
        }) as Promise<Address>,
    ),
  );
  if (acl !== FHEVM_HOST.acl || hcu !== FHEVM_HOST.hcuLimit || input !== FHEVM_HOST.inputVerifier) {
    throw new Error(
      `@fhevm/host-contracts was built for other addresses (ACL ${acl}, HCULimit ${hcu}, InputVerifier ${input})`,
    );
  }
  // No constructor or proxy ran: the ACL's owner (who may initialize the
  // verifiers) and the verifiers' "initialized once" marker are set directly,
  // as a proxy deployment would have left them.
  await Promise.all([
    testClient.setStorageAt({
      address: FHEVM_HOST.acl,
      index: OWNABLE_SLOT,
      value: pad(owner.address, { size: 32 }),
    }),
    ...[FHEVM_HOST.kmsVerifier, FHEVM_HOST.inputVerifier].map((address) =>
      testClient.setStorageAt({
        address,
        index: INITIALIZABLE_SLOT,
        value: pad("0x01", { size: 32 }),
      }),
    ),
  ]);
  const kmsSigner = privateKeyToAccount(devnetKmsSignerKey()).address;
  const coprocessorSigner = privateKeyToAccount(devnetCoprocessorSignerKey()).address;
  const [automine, nonce] = await Promise.all([
    testClient.getAutomine(),
    publicClient.getTransactionCount({ address: owner.address, blockTag: "pending" }),
  ]);
  const hashes = [
    await wallet.sendTransaction({
      to: FHEVM_HOST.kmsVerifier,
      gas: 1_000_000n,
      nonce,
      data: encodeFunctionData({
        abi: hostArtifact("KMSVerifier").abi,
        functionName: "initializeFromEmptyProxy",
        args: [FHEVM_GATEWAY.decryption, BigInt(FHEVM_GATEWAY.chainId), [kmsSigner], 1n],
      }),
    }),
    await wallet.sendTransaction({
      to: FHEVM_HOST.inputVerifier,
      gas: 1_000_000n,
      nonce: nonce + 1,
      data: encodeFunctionData({
        abi: hostArtifact("InputVerifier").abi,
        functionName: "initializeFromEmptyProxy",
        args: [
          FHEVM_GATEWAY.inputVerification,
          BigInt(FHEVM_GATEWAY.chainId),
          [coprocessorSigner],
          1n,
        ],
      }),
    }),
  ];
  if (!automine) await testClient.mine({ blocks: 1 });
  for (const hash of hashes) {
    const receipt = await publicClient.waitForTransactionReceipt({
      hash,
      timeout: RECEIPT_TIMEOUT_MS,
    });
    if (receipt.status !== "success")
      throw new Error(`fhEVM host initialization reverted (${hash})`);
  }
}

export interface DevnetFhevmOptions {
  rpcUrl: string;
  chainId: number;
  /** Where encrypted inputs' cleartexts are kept across restarts (JSON lines). */
  cleartextFile?: string | undefined;
}

export interface DevnetFhevm {
  /** What the relayer SDK's `createInstance` gives in production. */
  instance: FhevmInstanceLike;
  close(): void;
}

interface InputProofPayload {
  contractChainId: string | number;
  contractAddress: string;
  userAddress: string;
  ciphertextWithInputVerification: string;
  extraData: string;
  mockData: {
    aclContractAddress: string;
    fhevmTypes: number[];
    clearTextValuesBigIntHex: string[];
    metadatas: { blockNumber: number; index: number; transactionHash: string }[];
  };
}

/**
 * The mock coprocessor, KMS and relayer for one chain, as an instance with
 * the relayer SDK's interface. ethers and the mock library load only here.
 */
export async function startDevnetFhevm(opts: DevnetFhevmOptions): Promise<DevnetFhevm> {
  const { ethers } = await import("ethers");
  const mock = await import("@fhevm/mock-utils");
  const provider = new ethers.JsonRpcProvider(opts.rpcUrl, opts.chainId, {
    staticNetwork: true,
    cacheTimeout: -1,
  });
  const kms = new ethers.Wallet(devnetKmsSignerKey());
  const coprocessorSigner = new ethers.Wallet(devnetCoprocessorSignerKey());
  type Metadata = { blockNumber: number; index: number; transactionHash: string };
  const file = opts.cleartextFile;
  let linesRead = 0;
  /** Inserts the file's entries not seen yet: inputs other processes encrypted. */
  const readNewEntries = async (into: {
    insertHandleBytes32(
      h: string,
      c: string,
      m: Metadata,
      o?: { replace?: boolean },
    ): Promise<void>;
  }) => {
    if (!file || !existsSync(file)) return;
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l.trim());
    for (const line of lines.slice(linesRead)) {
      const { handle, clearHex, metadata } = JSON.parse(line) as {
        handle: string;
        clearHex: string;
        metadata: Metadata;
      };
      await into.insertHandleBytes32(handle, clearHex, metadata, { replace: true });
    }
    linesRead = lines.length;
  };
  // On the devnet the "KMS" is whatever the mock coprocessors know, so one
  // that misses a handle looks in the shared file before giving up, as
  // every client of Zama's one KMS would find it.
  class SharedDB extends mock.FhevmDBMap {
    override async queryHandleBytes32(handle: string) {
      const found = await this.tryQueryHandleBytes32(handle);
      if (found) return found;
      await readNewEntries(this);
      return super.queryHandleBytes32(handle);
    }
  }
  const db = new SharedDB();
  await db.init(0);
  await readNewEntries(db);
  const coprocessor = await mock.MockCoprocessor.create(provider, {
    coprocessorContractAddress: FHEVM_HOST.executor,
    coprocessorSigners: [coprocessorSigner],
    inputVerifierContractAddress: FHEVM_HOST.inputVerifier,
    db,
  });
  const kmsVerifier = await mock.contracts.KMSVerifier.create(
    provider,
    FHEVM_HOST.kmsVerifier,
    undefined,
    { signers: [kms] },
  );

  const remember = (handle: string, clearHex: string, metadata: object): void => {
    if (opts.cleartextFile) {
      appendFileSync(opts.cleartextFile, JSON.stringify({ handle, clearHex, metadata }) + "\n");
    }
  };

  // What Zama's relayer answers, computed here. The mock instance asks
  // through this object's `send`, as it would a JSON-RPC provider.
  const relayerProvider = {
    async send(method: string, params: unknown[]): Promise<unknown> {
      const payload = params[0] as Record<string, unknown>;
      switch (method) {
        case mock.relayer.RELAYER_V1_INPUT_PROOF: {
          const p = payload as unknown as InputProofPayload;
          if (getAddress(p.mockData.aclContractAddress) !== FHEVM_HOST.acl) {
            throw new Error(`input proof for another ACL (${p.mockData.aclContractAddress})`);
          }
          const handles = mock.FhevmHandle.computeHandles(
            ethers.getBytes(p.ciphertextWithInputVerification),
            p.mockData.fhevmTypes,
            p.mockData.aclContractAddress,
            Number(p.contractChainId),
            0,
          );
          const response = await coprocessor.computeCoprocessorSignatures(
            handles,
            Number(p.contractChainId),
            p.contractAddress,
            p.userAddress,
            p.extraData,
          );
          for (let i = 0; i < response.handles.length; i++) {
            const handle = `0x${response.handles[i]}`;
            const clearHex = p.mockData.clearTextValuesBigIntHex[i]!;
            const metadata = p.mockData.metadatas[i]!;
            await coprocessor.insertHandleBytes32(handle, clearHex, metadata);
            remember(handle, clearHex, metadata);
          }
          return response;
        }
        case mock.relayer.RELAYER_V1_PUBLIC_DECRYPT: {
          const handles = payload["ciphertextHandles"] as string[];
          await mock.MockFhevmInstance.verifyPublicACLPermissions(
            provider,
            FHEVM_HOST.acl,
            handles,
          );
          const clear = await coprocessor.queryHandlesBytes32AsHex(handles);
          const signed = await kmsVerifier.computeDecryptionSignatures(
            handles,
            clear,
            payload["extraData"] as string,
          );
          return { decrypted_value: signed.abiEncodedClearResult, signatures: signed.signatures };
        }
        case mock.relayer.RELAYER_V1_USER_DECRYPT: {
          // The instance has checked the ACL and the user's signature already.
          const pairs = payload["handleContractPairs"] as { handle: string }[];
          const handles = pairs.map((h) => ethers.toBeHex(ethers.toBigInt(h.handle), 32));
          const values = await coprocessor.queryHandlesBytes32AsHex(handles);
          return { payload: { decrypted_values: values }, signature: ethers.ZeroHash };
        }
        default:
          throw new Error(`the devnet relayer does not answer ${method}`);
      }
    },
  };
  const instance = await mock.MockFhevmInstance.create(
    relayerProvider,
    provider,
    {
      verifyingContractAddressDecryption: FHEVM_GATEWAY.decryption,
      verifyingContractAddressInputVerification: FHEVM_GATEWAY.inputVerification,
      kmsContractAddress: FHEVM_HOST.kmsVerifier,
      inputVerifierContractAddress: FHEVM_HOST.inputVerifier,
      aclContractAddress: FHEVM_HOST.acl,
      chainId: opts.chainId,
      gatewayChainId: FHEVM_GATEWAY.chainId,
    },
    {
      inputVerifierProperties: { signers: [coprocessorSigner] },
      kmsVerifierProperties: { signers: [kms] },
    },
  );
  return {
    instance: instance as unknown as FhevmInstanceLike,
    close: () => provider.destroy(),
  };
}
