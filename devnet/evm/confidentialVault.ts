/**
 * Places the confidential settlement vault on the devnet's `eip155:8453`
 * chain: the fhEVM host contracts first (devnet/fhevm.ts), then the vault's
 * read-only lens, its court and the vault's runtime code at their fixed
 * addresses, the vault initialized with the devnet USDC, the lens, the court, the
 * devnet operator and bond-owner keys, the challenge window and the host's
 * addresses; then the bond owner deposits the operator bond (minted by the
 * token's owner), without which no day could close.
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
  type Abi,
  type Address,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { Artifacts } from "./compile.js";
import { FHEVM_HOST, placeFhevmHost } from "./fhevm.js";
import {
  devnetConfidentialBondOwnerKey,
  devnetConfidentialOperatorKey,
  devnetDeployerKey,
} from "./keys.js";

/** Where the devnet keeps the vault: fixed, so a resource server's configuration never changes. */
const CONFIDENTIAL_VAULT_ADDRESS: Address = "0x4020C0F1De000000000000000000000000000008";
/** Where it keeps the vault's lens (the reads the vault runs from it). */
const CONFIDENTIAL_LENS_ADDRESS: Address = "0x4020C0f1De000000000000000000000000000009";

/** Where it keeps the vault's court (challenges and the bond, run by the vault's fallback). */
const CONFIDENTIAL_COURT_ADDRESS: Address = "0x4020C0f1de00000000000000000000000000000A";

/**
 * The vault's ABI as callers see it: its own functions, the court's that its
 * fallback runs (functions and events), and the reads the court's fallback
 * answers from the lens; each entry once.
 */
export function confidentialVaultAbiOf(artifacts: Artifacts): Abi {
  const vault = artifacts["ConfidentialSettlementVault"];
  const court = artifacts["ConfidentialVaultCourt"];
  const lens = artifacts["ConfidentialVaultLens"];
  if (!vault || !court || !lens)
    throw new Error("the confidential vault, its court or its lens is missing from the artifacts");
  const seen = new Set(vault.abi.map((e) => JSON.stringify(e)));
  const fresh = (e: Abi[number]) => {
    const key = JSON.stringify(e);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  };
  return [
    ...vault.abi,
    ...court.abi.filter((e) => (e.type === "function" || e.type === "event") && fresh(e)),
    ...lens.abi.filter((e) => e.type === "function" && fresh(e)),
  ];
}

/** The only network with a confidential vault (spec 2.7). */
export const CONFIDENTIAL_NETWORK_ID = "eip155:8453";

export interface DevnetConfidentialInfo {
  /** The vault (the confidential `payTo`). */
  contractAddress: Address;
  operatorPrivateKey: Hex;
  /** Holds the operator bond: withdraws it, resumes after a proven fraud. */
  bondOwnerPrivateKey: Hex;
}

/** The devnet's operator bond: far above any day a test or a developer collects. */
const DEVNET_BOND = 1_000_000n * 10n ** 6n;

const RECEIPT_TIMEOUT_MS = 60_000;

/**
 * The vault's challenge bounty in USDC base units (6 decimals): `base` once
 * per slot, day and attempt whose openings prove a shortfall, `perOpening`
 * for each opening the slot presented in that attempt.
 */
export interface ChallengeBounty {
  base: bigint;
  perOpening: bigint;
}

export async function placeConfidentialVault(opts: {
  rpcUrl: string;
  chainId: number;
  artifacts: Artifacts;
  usdc: Address;
  /** Mints the bond (the USDC's owner). Default: the devnet deployer. */
  tokenOwnerKey?: Hex;
  /**
   * Seconds between a day's close and the release of its credits, during
   * which merchants may challenge it. Default 0: the devnet releases a day
   * as soon as it closes; tests of challenges set one. (The devnet places
   * the runtime code and runs `initialize`, which has no floor; a deployed
   * vault's constructor refuses a window under `MIN_CHALLENGE_WINDOW`.)
   */
  challengeWindowSeconds?: number;
  /**
   * What a proven shortfall pays its slot from the bond besides the
   * shortfall. Default none (0 and 0): the devnet has no challenge window
   * by default either; tests of the bounty set one. (A deployed vault's
   * constructor refuses a bounty under the contract's floor.)
   */
  challengeBounty?: ChallengeBounty;
}): Promise<DevnetConfidentialInfo> {
  const info: DevnetConfidentialInfo = {
    contractAddress: CONFIDENTIAL_VAULT_ADDRESS,
    operatorPrivateKey: devnetConfidentialOperatorKey(),
    bondOwnerPrivateKey: devnetConfidentialBondOwnerKey(),
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
  const lens = opts.artifacts["ConfidentialVaultLens"];
  const court = opts.artifacts["ConfidentialVaultCourt"];
  if (!artifact || !lens || !court) {
    throw new Error(
      "the confidential vault, its court or its lens is missing from the compiled artifacts",
    );
  }
  const [code, lensCode, courtCode] = await Promise.all([
    publicClient.getCode({ address: CONFIDENTIAL_VAULT_ADDRESS }),
    publicClient.getCode({ address: CONFIDENTIAL_LENS_ADDRESS }),
    publicClient.getCode({ address: CONFIDENTIAL_COURT_ADDRESS }),
  ]);
  if (code && code !== "0x") {
    // A kept chain from before a change of the vault: its storage is laid
    // out for the old code, so neither can be kept alongside the other.
    if (
      code.toLowerCase() !== artifact.deployedBytecode.toLowerCase() ||
      lensCode?.toLowerCase() !== lens.deployedBytecode.toLowerCase() ||
      courtCode?.toLowerCase() !== court.deployedBytecode.toLowerCase()
    ) {
      throw new Error(
        "the kept devnet chain holds an older confidential vault; start from a fresh devnet state (remove the kept chain) to use this one",
      );
    }
    return info;
  }

  await placeFhevmHost(opts.rpcUrl, opts.chainId);

  const testClient = createTestClient({ chain, transport, mode: "anvil" });
  const operator = privateKeyToAccount(info.operatorPrivateKey);
  const bondOwner = privateKeyToAccount(info.bondOwnerPrivateKey);
  await Promise.all([
    testClient.setCode({
      address: CONFIDENTIAL_VAULT_ADDRESS,
      bytecode: artifact.deployedBytecode,
    }),
    testClient.setCode({ address: CONFIDENTIAL_LENS_ADDRESS, bytecode: lens.deployedBytecode }),
    testClient.setCode({ address: CONFIDENTIAL_COURT_ADDRESS, bytecode: court.deployedBytecode }),
    testClient.setBalance({ address: operator.address, value: parseEther("1000") }),
    testClient.setBalance({ address: bondOwner.address, value: parseEther("10") }),
  ]);
  const wallet = createWalletClient({ chain, transport, account: operator });
  const hash = await wallet.writeContract({
    address: CONFIDENTIAL_VAULT_ADDRESS,
    abi: artifact.abi,
    functionName: "initialize",
    args: [
      opts.usdc,
      operator.address,
      bondOwner.address,
      BigInt(opts.challengeWindowSeconds ?? 0),
      opts.challengeBounty ?? { base: 0n, perOpening: 0n },
      CONFIDENTIAL_LENS_ADDRESS,
      CONFIDENTIAL_COURT_ADDRESS,
      {
        ACLAddress: FHEVM_HOST.acl,
        CoprocessorAddress: FHEVM_HOST.executor,
        KMSVerifierAddress: FHEVM_HOST.kmsVerifier,
      },
    ],
    gas: 500_000n,
  });
  const automine = await testClient.getAutomine();
  const confirm = async (what: string, sent: Hex) => {
    if (!automine) await testClient.mine({ blocks: 1 });
    const receipt = await publicClient.waitForTransactionReceipt({
      hash: sent,
      timeout: RECEIPT_TIMEOUT_MS,
    });
    if (receipt.status !== "success") throw new Error(`vault ${what} reverted (${sent})`);
  };
  await confirm("initialize", hash);

  // The operator bond: minted to its owner, approved, deposited.
  const usdcAbi = opts.artifacts["DevnetUSDC"]?.abi;
  if (!usdcAbi) throw new Error("DevnetUSDC is missing from the compiled artifacts");
  const minter = createWalletClient({
    chain,
    transport,
    account: privateKeyToAccount(opts.tokenOwnerKey ?? devnetDeployerKey()),
  });
  const bondWallet = createWalletClient({ chain, transport, account: bondOwner });
  await confirm(
    "bond mint",
    await minter.writeContract({
      address: opts.usdc,
      abi: usdcAbi,
      functionName: "mint",
      args: [bondOwner.address, DEVNET_BOND],
      gas: 200_000n,
    }),
  );
  await confirm(
    "bond approve",
    await bondWallet.writeContract({
      address: opts.usdc,
      abi: usdcAbi,
      functionName: "approve",
      args: [CONFIDENTIAL_VAULT_ADDRESS, DEVNET_BOND],
      gas: 200_000n,
    }),
  );
  await confirm(
    "bond deposit",
    await bondWallet.writeContract({
      address: CONFIDENTIAL_VAULT_ADDRESS,
      abi: court.abi, // the court's code, run at the vault's address
      functionName: "depositBond",
      args: [DEVNET_BOND],
      gas: 200_000n,
    }),
  );
  return info;
}
