/**
 * Confidential settlement's configuration in production, from the
 * environment (devnet mode needs none: the devnet places the vault and the
 * mock fhEVM and hands over their keys). All or nothing: any variable set
 * makes the rest required, and none set means confidential settlement is off.
 *
 * - `CONFIDENTIAL_CONTRACT_ADDRESS`: the vault on eip155:8453 (the
 *   confidential `payTo`). The chain is reached through `EVM_RPC_URLS_8453`.
 * - `CONFIDENTIAL_OPERATOR_KEY` or, better, `CONFIDENTIAL_OPERATOR_KEY_FILE`:
 *   the vault's operator (attributes each payment to its merchant's slot
 *   when collected, assigns slots, submits batches, withdrawals and
 *   finalizations, pays their gas). Not one of `EVM_PRIVATE_KEYS`: its
 *   transactions must not share nonces with the settlement signers.
 *   (There is no receipt-signer key: a receipt is the opening of the
 *   commitment the vault stores at collect, and nobody signs it.)
 * - `CONFIDENTIAL_RELAYER_URL`: Zama's relayer (input proofs, decryptions).
 * - `CONFIDENTIAL_RELAYER_API_KEY` / `_FILE`: the relayer's API key (sent as
 *   its `x-api-key` header); production relayers meter and refuse anonymous use.
 * - `CONFIDENTIAL_ACL_ADDRESS`, `CONFIDENTIAL_EXECUTOR_ADDRESS`,
 *   `CONFIDENTIAL_KMS_VERIFIER_ADDRESS`, `CONFIDENTIAL_INPUT_VERIFIER_ADDRESS`:
 *   the fhEVM host contracts on the chain.
 * - `CONFIDENTIAL_DECRYPTION_ADDRESS`, `CONFIDENTIAL_INPUT_VERIFICATION_ADDRESS`,
 *   `CONFIDENTIAL_GATEWAY_CHAIN_ID`: the gateway chain's contracts and id that
 *   the KMS and coprocessor signatures are bound to.
 *
 * Production confidential settlement needs a chain where Zama runs the
 * fhEVM (its host contracts, coprocessors, KMS and relayer). The relayer SDK
 * bundled here ships settings for Ethereum and Sepolia only, none for Base,
 * so every address is given here rather than taken from the SDK, and the
 * service refuses to start confidential mode when any is missing or when
 * the chain has no contract at the host addresses (vault.ts).
 */
import { ConfigError } from "../lib/configError.js";
import type { ConfigVariable } from "../lib/envVars.js";
import { rpcUrlOf, type ChainSetups } from "../chains/index.js";
import { CONFIDENTIAL_NETWORK, type ConfidentialVaultOptions } from "../chains/confidentialPort.js";

export interface ConfidentialConfig {
  contractAddress: `0x${string}`;
  operatorKey: `0x${string}`;
  fhevm: {
    relayerUrl: string;
    relayerApiKey: string;
    aclAddress: `0x${string}`;
    executorAddress: `0x${string}`;
    kmsVerifierAddress: `0x${string}`;
    inputVerifierAddress: `0x${string}`;
    decryptionAddress: `0x${string}`;
    inputVerificationAddress: `0x${string}`;
    gatewayChainId: number;
  };
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const KEY = /^0x[0-9a-fA-F]{64}$/;

const ADDRESS_VARS = {
  contractAddress: "CONFIDENTIAL_CONTRACT_ADDRESS",
  aclAddress: "CONFIDENTIAL_ACL_ADDRESS",
  executorAddress: "CONFIDENTIAL_EXECUTOR_ADDRESS",
  kmsVerifierAddress: "CONFIDENTIAL_KMS_VERIFIER_ADDRESS",
  inputVerifierAddress: "CONFIDENTIAL_INPUT_VERIFIER_ADDRESS",
  decryptionAddress: "CONFIDENTIAL_DECRYPTION_ADDRESS",
  inputVerificationAddress: "CONFIDENTIAL_INPUT_VERIFICATION_ADDRESS",
} as const;

/** Every variable, for "set all of them" messages. */
const CONFIDENTIAL_VARIABLES = [
  ...Object.values(ADDRESS_VARS),
  "CONFIDENTIAL_OPERATOR_KEY",
  "CONFIDENTIAL_RELAYER_URL",
  "CONFIDENTIAL_RELAYER_API_KEY",
  "CONFIDENTIAL_GATEWAY_CHAIN_ID",
] as const;

/**
 * `readSecret` reads VAR or the file named by VAR_FILE (src/lib/envVars.ts).
 * Returns undefined when nothing is set.
 */
export function parseConfidentialConfig(
  env: NodeJS.ProcessEnv,
  readSecret: (name: string) => string | undefined,
): ConfidentialConfig | undefined {
  const value = (name: string) => env[name]?.trim() || undefined;
  const operatorKey = readSecret("CONFIDENTIAL_OPERATOR_KEY")?.trim();
  const relayerApiKey = readSecret("CONFIDENTIAL_RELAYER_API_KEY")?.trim();
  const secrets: Record<string, string | undefined> = {
    CONFIDENTIAL_OPERATOR_KEY: operatorKey,
    CONFIDENTIAL_RELAYER_API_KEY: relayerApiKey,
  };
  const set = CONFIDENTIAL_VARIABLES.filter((name) =>
    name in secrets ? secrets[name] : value(name),
  );
  if (set.length === 0) return undefined;
  const missing = CONFIDENTIAL_VARIABLES.filter((name) => !set.includes(name));
  if (missing.length > 0) {
    throw new ConfigError(
      `confidential settlement cannot start in production without Zama's fhEVM on ${CONFIDENTIAL_NETWORK}: also set ${missing.join(", ")} (keys may be given as *_FILE), or unset every CONFIDENTIAL_* variable to run without it`,
    );
  }

  const addresses = {} as Record<keyof typeof ADDRESS_VARS, `0x${string}`>;
  for (const [field, name] of Object.entries(ADDRESS_VARS) as [
    keyof typeof ADDRESS_VARS,
    string,
  ][]) {
    const v = value(name)!;
    if (!ADDRESS.test(v)) throw new ConfigError(`${name} must be a 0x-prefixed 20-byte address`);
    addresses[field] = v as `0x${string}`;
  }
  // Never echo a key: only which variable is wrong.
  if (!KEY.test(operatorKey ?? "")) {
    throw new ConfigError("CONFIDENTIAL_OPERATOR_KEY must be a 0x-prefixed 32-byte hex key");
  }
  const relayerUrl = value("CONFIDENTIAL_RELAYER_URL")!;
  if (!/^https:\/\//.test(relayerUrl)) {
    throw new ConfigError("CONFIDENTIAL_RELAYER_URL must be an https:// URL");
  }
  const gatewayChainId = Number(value("CONFIDENTIAL_GATEWAY_CHAIN_ID"));
  if (!Number.isInteger(gatewayChainId) || gatewayChainId <= 0) {
    throw new ConfigError("CONFIDENTIAL_GATEWAY_CHAIN_ID must be a positive whole number");
  }
  const { contractAddress, ...hostAddresses } = addresses;
  return {
    contractAddress,
    operatorKey: operatorKey as `0x${string}`,
    fhevm: { relayerUrl, relayerApiKey: relayerApiKey!, gatewayChainId, ...hostAddresses },
  };
}

/**
 * The vault the service reaches in production: the configured contract and
 * keys, on the confidential network's first configured RPC URL. Undefined
 * when confidential settlement is not configured.
 */
export function confidentialVaultOptions(config: {
  confidentialVault: ConfidentialConfig | undefined;
  chains: ChainSetups;
}): ConfidentialVaultOptions | undefined {
  const c = config.confidentialVault;
  const rpcUrl = rpcUrlOf(config.chains, CONFIDENTIAL_NETWORK);
  if (!c || !rpcUrl) return undefined;
  return {
    rpcUrl,
    chainId: Number(CONFIDENTIAL_NETWORK.split(":")[1]),
    contractAddress: c.contractAddress,
    operatorKey: c.operatorKey,
    mode: c.fhevm,
  };
}

/**
 * The variables this file reads, for docs/configuration.md (`npm run
 * docs:config`; a test fails when one read here is missing). All or
 * nothing, production only (see the header).
 */
export const VARIABLES: readonly ConfigVariable[] = [
  {
    name: "CONFIDENTIAL_CONTRACT_ADDRESS",
    description: "The vault on eip155:8453 (the confidential offers' `payTo`).",
  },
  {
    name: "CONFIDENTIAL_OPERATOR_KEY",
    description:
      "The vault's operator: attributes each confidential payment to its merchant's slot when collected, assigns slots, submits daily batches, withdrawals and finalizations, and pays their gas. Its own key, not one of `EVM_PRIVATE_KEYS`, so its transactions never share nonces with the settlement signers.",
    secret: true,
  },
  {
    name: "CONFIDENTIAL_RELAYER_URL",
    description: "Zama's relayer (`https://`): encrypted-input proofs and KMS decryptions.",
  },
  {
    name: "CONFIDENTIAL_RELAYER_API_KEY",
    description:
      "The relayer's API key, sent as its `x-api-key` header (or `CONFIDENTIAL_RELAYER_API_KEY_FILE`).",
    secret: true,
  },
  {
    name: "CONFIDENTIAL_ACL_ADDRESS",
    description: "The chain's fhEVM host contract: the ACL.",
  },
  {
    name: "CONFIDENTIAL_EXECUTOR_ADDRESS",
    description: "The chain's fhEVM host contract: the FHE executor.",
  },
  {
    name: "CONFIDENTIAL_KMS_VERIFIER_ADDRESS",
    description: "The chain's fhEVM host contract: the KMS verifier.",
  },
  {
    name: "CONFIDENTIAL_INPUT_VERIFIER_ADDRESS",
    description: "The chain's fhEVM host contract: the input verifier.",
  },
  {
    name: "CONFIDENTIAL_DECRYPTION_ADDRESS",
    description: "The gateway chain's decryption contract, which the KMS signatures are bound to.",
  },
  {
    name: "CONFIDENTIAL_INPUT_VERIFICATION_ADDRESS",
    description:
      "The gateway chain's input-verification contract, which the coprocessor signatures are bound to.",
  },
  {
    name: "CONFIDENTIAL_GATEWAY_CHAIN_ID",
    description: "The gateway chain's id (a positive whole number).",
  },
];
