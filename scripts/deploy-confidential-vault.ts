/**
 * Deploys the confidential settlement vault to eip155:8453 (or the chain
 * `CONFIDENTIAL_DEPLOY_CHAIN_ID` names), its read-only lens and its court first, the vault
 * initialized in its deployment transaction, and prints the service's
 * `CONFIDENTIAL_CONTRACT_ADDRESS`.
 *
 *   CONFIDENTIAL_DEPLOY_RPC_URL=https://…            the chain (default: EVM_RPC_URLS_8453's first)
 *   CONFIDENTIAL_DEPLOYER_KEY_FILE=/run/secrets/…    pays the gas (or CONFIDENTIAL_DEPLOYER_KEY)
 *   CONFIDENTIAL_OPERATOR_ADDRESS=0x…                the operator key's address
 *   CONFIDENTIAL_BOND_OWNER_ADDRESS=0x…              holds the operator bond (a cold key, not the operator)
 *   CONFIDENTIAL_CHALLENGE_WINDOW_SECONDS=172800     how long a closed day may be challenged (default 2 days;
 *                                                    the contract takes 1 to 30 days)
 *   CONFIDENTIAL_CHALLENGE_BOUNTY_BASE=100000        paid from the bond to a slot whose challenges prove a
 *   CONFIDENTIAL_CHALLENGE_BOUNTY_PER_OPENING=5000   shortfall, once, and per opening presented (USDC base
 *                                                    units; defaults 0.10 and 0.005 USDC; the contract
 *                                                    takes at least 0.01 and 0.001)
 *   CONFIDENTIAL_ACL_ADDRESS, CONFIDENTIAL_EXECUTOR_ADDRESS, CONFIDENTIAL_KMS_VERIFIER_ADDRESS
 *                                                    the chain's fhEVM host contracts
 *   CONFIDENTIAL_ASSET_ADDRESS=0x…                   default: USDC on Base
 *
 *   npm run confidential:deploy
 *
 * It refuses a chain without contracts at the fhEVM addresses. Zama's fhEVM
 * must run on the chain first; see docs/confidential.md.
 */
import { readFileSync } from "node:fs";
import type { Address, Hex } from "viem";
import {
  DEFAULT_CHALLENGE_BOUNTY,
  deployConfidentialVault,
} from "../devnet/evm/deployConfidentialVault.js";

/** Two days: a merchant's wallet or its daily check has a full day's slack. */
const DEFAULT_CHALLENGE_WINDOW_S = 172_800;

/** USDC on Base (eip155:8453). */
const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

function need(name: string): string {
  const v = process.env[name]?.trim();
  if (!v) throw new Error(`set ${name}`);
  return v;
}
function address(name: string, fallback?: string): Address {
  const v = process.env[name]?.trim() || fallback;
  if (!v || !/^0x[0-9a-fA-F]{40}$/.test(v)) throw new Error(`${name} must be an address`);
  return v as Address;
}
function deployerKey(): Hex {
  const file = process.env["CONFIDENTIAL_DEPLOYER_KEY_FILE"]?.trim();
  const key = (file ? readFileSync(file, "utf8") : need("CONFIDENTIAL_DEPLOYER_KEY")).trim();
  // Never echo the key: only which variable is wrong.
  if (!/^0x[0-9a-fA-F]{64}$/.test(key)) {
    throw new Error("the deployer key must be a 0x-prefixed 32-byte hex key");
  }
  return key as Hex;
}

/** A whole number of USDC base units from the environment, or the default. */
function units(name: string, fallback: bigint): bigint {
  const v = process.env[name]?.trim();
  if (!v) return fallback;
  if (!/^[0-9]+$/.test(v)) throw new Error(`${name} must be a whole number of USDC base units`);
  return BigInt(v);
}

async function main(): Promise<void> {
  const rpcUrl =
    process.env["CONFIDENTIAL_DEPLOY_RPC_URL"]?.trim() ||
    process.env["EVM_RPC_URLS_8453"]?.split(",")[0]?.trim();
  if (!rpcUrl) throw new Error("set CONFIDENTIAL_DEPLOY_RPC_URL (or EVM_RPC_URLS_8453)");
  const deployed = await deployConfidentialVault({
    rpcUrl,
    chainId: Number(process.env["CONFIDENTIAL_DEPLOY_CHAIN_ID"] ?? 8453),
    deployerKey: deployerKey(),
    asset: address("CONFIDENTIAL_ASSET_ADDRESS", BASE_USDC),
    operator: address("CONFIDENTIAL_OPERATOR_ADDRESS"),
    bondOwner: address("CONFIDENTIAL_BOND_OWNER_ADDRESS"),
    challengeWindowSeconds: Number(
      process.env["CONFIDENTIAL_CHALLENGE_WINDOW_SECONDS"]?.trim() || DEFAULT_CHALLENGE_WINDOW_S,
    ),
    challengeBounty: {
      base: units("CONFIDENTIAL_CHALLENGE_BOUNTY_BASE", DEFAULT_CHALLENGE_BOUNTY.base),
      perOpening: units(
        "CONFIDENTIAL_CHALLENGE_BOUNTY_PER_OPENING",
        DEFAULT_CHALLENGE_BOUNTY.perOpening,
      ),
    },
    coprocessor: {
      acl: address("CONFIDENTIAL_ACL_ADDRESS"),
      executor: address("CONFIDENTIAL_EXECUTOR_ADDRESS"),
      kmsVerifier: address("CONFIDENTIAL_KMS_VERIFIER_ADDRESS"),
    },
  });
  process.stdout.write(
    `deployed and initialized in ${deployed.transaction} (block ${deployed.deploymentBlock}), its read-only lens at ${deployed.lens}, its court at ${deployed.court}\nCONFIDENTIAL_CONTRACT_ADDRESS=${deployed.address}\nNo day closes until the bond owner deposits the operator bond (depositBond): see docs/confidential.md.\n`,
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`could not deploy the vault: ${(e as Error).message}\n`);
  process.exit(1);
});
