/**
 * Deploys the confidential settlement vault to a real chain: its read-only
 * lens and its court first (no arguments, no state: the vault runs their
 * code on its own storage), then one creation transaction whose
 * constructor initializes the vault (token, operator, bond owner, challenge
 * window, the lens, the court, the chain's fhEVM host contracts), so no one can
 * initialize a freshly deployed vault before its owner (the devnet instead
 * places the runtime code and calls `initialize`, see confidentialVault.ts).
 * The constructor refuses a challenge window under the contract's
 * `MIN_CHALLENGE_WINDOW` (a day) or over `MAX_CHALLENGE_WINDOW` (30 days),
 * and a challenge bounty under its floor.
 *
 * The contract is compiled from `devnet/contracts` by the same solc step as
 * the devnet's (compile.ts). Only addresses are needed: the operator's key
 * stays where the service runs.
 */
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  http,
  type Abi,
  type Address,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { loadArtifacts } from "./compile.js";
import type { ChallengeBounty } from "./confidentialVault.js";

/** The contract's MIN_CHALLENGE_WINDOW and MAX_CHALLENGE_WINDOW, checked before anything is sent. */
const MIN_WINDOW_S = 86_400;
const MAX_WINDOW_S = 30 * 86_400;
/** The contract's MIN_CHALLENGE_BOUNTY_BASE and MIN_CHALLENGE_BOUNTY_PER_OPENING (USDC base units). */
const MIN_BOUNTY = { base: 10_000n, perOpening: 1_000n };

/**
 * The default challenge bounty, in USDC base units (6 decimals): 0.10 USDC
 * per proof and 0.005 USDC per opening presented. Measured on the devnet, a
 * proof costs about 656k gas besides its openings (presenting one receipt
 * 316k, resolving with a shortfall up to 369k, less the one receipt's 29k)
 * and 29k gas per opening. With ETH at $4,000 a gas unit at 0.04 gwei costs
 * $0.00000016: 656k gas is $0.105 and 29k gas $0.0046, so the defaults repay
 * a true challenger's gas up to about 0.04 gwei, several times what an L2
 * such as Base usually charges (around 0.01 gwei), and a thief pays at
 * least 0.105 USDC for every theft proven.
 */
export const DEFAULT_CHALLENGE_BOUNTY: ChallengeBounty = { base: 100_000n, perOpening: 5_000n };

export interface VaultDeployment {
  rpcUrl: string;
  chainId: number;
  /** Pays the deployment's gas; it holds no role in the vault. */
  deployerKey: Hex;
  /** The token (USDC) the vault collects and pays out. */
  asset: Address;
  operator: Address;
  /**
   * Holds the operator bond (a cold key: deposits are anyone's, withdrawing
   * and resuming after a proven fraud are its alone); not the operator.
   */
  bondOwner: Address;
  /** Seconds between a day's close and the release of its credits (1 to 30 days). */
  challengeWindowSeconds: number;
  /**
   * What a proven shortfall pays its slot from the bond besides the
   * shortfall, USDC base units (default `DEFAULT_CHALLENGE_BOUNTY`; the
   * contract refuses less than 0.01 USDC per proof or 0.001 per opening).
   */
  challengeBounty?: ChallengeBounty;
  /** The chain's fhEVM host contracts. */
  coprocessor: { acl: Address; executor: Address; kmsVerifier: Address };
}

export interface DeployedVault {
  address: Address;
  /** The lens whose code the vault runs for its reads. */
  lens: Address;
  /** The court whose code the vault runs for challenges, the bond and resume. */
  court: Address;
  transaction: Hex;
  /** The vault's first block: where reading its logs may start. */
  deploymentBlock: bigint;
}

export async function deployConfidentialVault(d: VaultDeployment): Promise<DeployedVault> {
  if (getAddress(d.operator) === getAddress(d.bondOwner)) {
    throw new Error(
      "the bond owner must not be the operator: a stolen operator key would hold the bond",
    );
  }
  if (
    !Number.isInteger(d.challengeWindowSeconds) ||
    d.challengeWindowSeconds < MIN_WINDOW_S ||
    d.challengeWindowSeconds > MAX_WINDOW_S
  ) {
    throw new Error(
      `the challenge window must be ${MIN_WINDOW_S} to ${MAX_WINDOW_S} seconds (a day to 30 days: merchants' watchers check each close in it); the contract refuses anything else`,
    );
  }
  const bounty = d.challengeBounty ?? DEFAULT_CHALLENGE_BOUNTY;
  if (bounty.base < MIN_BOUNTY.base || bounty.perOpening < MIN_BOUNTY.perOpening) {
    throw new Error(
      `the challenge bounty must be at least ${MIN_BOUNTY.base} per proof and ${MIN_BOUNTY.perOpening} per opening (USDC base units); the contract refuses less`,
    );
  }
  const chain = defineChain({
    id: d.chainId,
    name: `chain ${d.chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [d.rpcUrl] } },
  });
  const transport = http(d.rpcUrl);
  const client = createPublicClient({ chain, transport, pollingInterval: 250 });
  if ((await client.getChainId()) !== d.chainId) {
    throw new Error(`${d.rpcUrl} is not chain ${d.chainId}`);
  }
  // Without the fhEVM every encrypted operation of the vault reverts.
  for (const [name, address] of Object.entries({ token: d.asset, ...d.coprocessor })) {
    const code = await client.getCode({ address });
    if (!code || code === "0x") {
      throw new Error(`there is no contract at ${address} (${name}) on chain ${d.chainId}`);
    }
  }
  const artifacts = await loadArtifacts();
  const artifact = artifacts["ConfidentialSettlementVault"];
  const lensArtifact = artifacts["ConfidentialVaultLens"];
  const courtArtifact = artifacts["ConfidentialVaultCourt"];
  if (!artifact || !lensArtifact || !courtArtifact) {
    throw new Error("the confidential vault, its court or its lens is missing from the artifacts");
  }
  const wallet = createWalletClient({
    chain,
    transport,
    account: privateKeyToAccount(d.deployerKey),
  });
  /** A part with no constructor arguments, deployed on its own. */
  const deployPart = async (what: string, part: { abi: Abi; bytecode: Hex }) => {
    const hash = await wallet.deployContract({ abi: part.abi, bytecode: part.bytecode });
    const r = await client.waitForTransactionReceipt({ hash });
    if (r.status !== "success" || !r.contractAddress) {
      throw new Error(`the vault ${what}'s deployment ${hash} failed`);
    }
    return getAddress(r.contractAddress);
  };
  const lens = await deployPart("lens", lensArtifact);
  const court = await deployPart("court", courtArtifact);
  const transaction = await wallet.deployContract({
    abi: artifact.abi,
    bytecode: artifact.bytecode,
    args: [
      d.asset,
      d.operator,
      d.bondOwner,
      BigInt(d.challengeWindowSeconds),
      bounty,
      lens,
      court,
      {
        ACLAddress: d.coprocessor.acl,
        CoprocessorAddress: d.coprocessor.executor,
        KMSVerifierAddress: d.coprocessor.kmsVerifier,
      },
    ],
  });
  const receipt = await client.waitForTransactionReceipt({ hash: transaction });
  if (receipt.status !== "success" || !receipt.contractAddress) {
    throw new Error(`the vault's deployment ${transaction} failed`);
  }
  const address = getAddress(receipt.contractAddress);
  const read = (functionName: string) =>
    client.readContract({ address, abi: artifact.abi, functionName }) as Promise<unknown>;
  const [operator, asset, deploymentBlock, bondOwner, window, lensOf, courtOf, base, perOpening] =
    await Promise.all([
      read("operator"),
      read("asset"),
      read("deploymentBlock"),
      read("bondOwner"),
      read("challengeWindow"),
      read("lens"),
      read("court"),
      read("challengeBountyBase"),
      read("challengeBountyPerOpening"),
    ]);
  if (
    getAddress(operator as Address) !== getAddress(d.operator) ||
    getAddress(asset as Address) !== getAddress(d.asset) ||
    getAddress(bondOwner as Address) !== getAddress(d.bondOwner) ||
    window !== BigInt(d.challengeWindowSeconds) ||
    base !== bounty.base ||
    perOpening !== bounty.perOpening ||
    getAddress(lensOf as Address) !== lens ||
    getAddress(courtOf as Address) !== court ||
    deploymentBlock !== receipt.blockNumber
  ) {
    throw new Error(`the vault at ${address} was not initialized as asked`);
  }
  return { address, lens, court, transaction, deploymentBlock: receipt.blockNumber };
}
