/**
 * Devnet keys, derived from the public Hardhat/Foundry test mnemonic. The
 * whole world knows them: they exist for local chains only and must never
 * hold anything of value.
 *
 * Layout (BIP-44, m/44'/60'/account'/0/index), fixed so that every devnet
 * run, test and example sees the same addresses:
 *   - facilitator signers: account 0, indexes 0…n-1
 *   - payers:              account 0, indexes 100…100+m-1
 *   - token deployer/owner: account 1, index 0. A separate account, so no
 *     facilitator or payer count can ever collide with it.
 */
import { pbkdf2Sync } from "node:crypto";
import { toHex, type Hex } from "viem";
import { HDKey, hdKeyToAccount } from "viem/accounts";

export const DEVNET_MNEMONIC = "test test test test test test test test test test test junk";

/** First payer index; facilitator keys live below it. */
const PAYER_INDEX_BASE = 100;

let master: HDKey | undefined;
const cache = new Map<string, Hex>();

/**
 * The BIP-39 seed is PBKDF2-HMAC-SHA512(mnemonic, "mnemonic", 2048 rounds).
 * viem's `mnemonicToAccount` recomputes it in JavaScript for every key
 * (~40 ms each); Node's native PBKDF2 done once makes a devnet start with a
 * dozen keys instant. The test file checks both give the same keys.
 */
function masterKey(): HDKey {
  master ??= HDKey.fromMasterSeed(
    pbkdf2Sync(DEVNET_MNEMONIC.normalize("NFKD"), "mnemonic", 2048, 64, "sha512"),
  );
  return master;
}

function keyAt(accountIndex: number, addressIndex: number): Hex {
  const id = `${accountIndex}/${addressIndex}`;
  let key = cache.get(id);
  if (!key) {
    const pk = hdKeyToAccount(masterKey(), { accountIndex, addressIndex }).getHdKey().privateKey;
    if (!pk) throw new Error(`no private key at m/44'/60'/${accountIndex}'/0/${addressIndex}`);
    key = toHex(pk);
    cache.set(id, key);
  }
  return key;
}

function checkCount(n: number, max: number, what: string): number {
  if (!Number.isInteger(n) || n < 0 || n > max) {
    throw new Error(`${what} must be a whole number from 0 to ${max}, got ${n}`);
  }
  return n;
}

/** Facilitator signer keys: HD indexes 0…n-1 (n ≤ 100, so they stay below the payers). */
export function devnetFacilitatorKeys(n: number): Hex[] {
  const length = checkCount(n, PAYER_INDEX_BASE, "facilitator key count");
  return Array.from({ length }, (_, i) => keyAt(0, i));
}

/** Payer keys: HD indexes 100…100+m-1. */
export function devnetPayerKeys(m: number): Hex[] {
  const length = checkCount(m, 10_000, "payer key count");
  return Array.from({ length }, (_, i) => keyAt(0, PAYER_INDEX_BASE + i));
}

/** Owns the devnet tokens (initializes them, mints). Not a payer, not a signer. */
export function devnetDeployerKey(): Hex {
  return keyAt(1, 0);
}

/**
 * The devnet's batch-settlement receiver authorizer: co-signs claims and
 * refunds for resource servers that delegate to the service, so devnet mode
 * advertises `receiverAuthorizer` with no configuration.
 */
export function devnetBatchAuthorizerKey(): Hex {
  return keyAt(1, 1);
}

/**
 * The confidential settlement vault's operator on the devnet: assigns slots,
 * submits the daily batches and finalizations, and pays their gas. Its own
 * key, so its transactions never race the facilitator signers' nonces.
 */
export function devnetConfidentialOperatorKey(): Hex {
  return keyAt(1, 2);
}

/**
 * Owns the devnet vault's operator bond: deposited at placement, and the
 * only key that may take it back or lift the freeze a proven fraud sets.
 */
export function devnetConfidentialBondOwnerKey(): Hex {
  return keyAt(1, 7);
}

/** Owns the devnet's fhEVM ACL, which lets it initialize the KMS and input verifiers. */
export function devnetFhevmHostOwnerKey(): Hex {
  return keyAt(1, 4);
}

/** The devnet's mock KMS: signs public decryptions (the proofs contracts check). */
export function devnetKmsSignerKey(): Hex {
  return keyAt(1, 5);
}

/** The devnet's mock coprocessor: signs encrypted-input proofs. */
export function devnetCoprocessorSignerKey(): Hex {
  return keyAt(1, 6);
}
