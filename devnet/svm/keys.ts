/**
 * Deterministic Solana keys for the devnet only: derived from fixed, public
 * seeds, so every run funds the same payers and fee payers. Never use them
 * anywhere else.
 */
import { createHash } from "node:crypto";
import {
  createKeyPairSignerFromPrivateKeyBytes,
  getBase58Decoder,
  type KeyPairSigner,
} from "@solana/kit";

export interface DevnetSolanaKey {
  signer: KeyPairSigner;
  /** 64 bytes (seed then public key), base58: the form wallets and SVM_PRIVATE_KEYS take. */
  secretKey: string;
}

async function derive(label: string, index: number): Promise<DevnetSolanaKey> {
  const seed = createHash("sha256").update(`x402-devnet-solana:${label}:${index}`).digest();
  const signer = await createKeyPairSignerFromPrivateKeyBytes(new Uint8Array(seed), true);
  const publicKey = new Uint8Array(await crypto.subtle.exportKey("raw", signer.keyPair.publicKey));
  const secret = new Uint8Array(64);
  secret.set(seed, 0);
  secret.set(publicKey, 32);
  return { signer, secretKey: getBase58Decoder().decode(secret) };
}

export function devnetSolanaPayers(n: number): Promise<DevnetSolanaKey[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => derive("payer", i)));
}

export function devnetSolanaFeePayers(n: number): Promise<DevnetSolanaKey[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => derive("fee-payer", i)));
}

/** The example resource server's payTo (it has a USDC token account on the devnet). */
export function devnetSolanaPayTo(): Promise<DevnetSolanaKey> {
  return derive("pay-to", 0);
}

/** Holds the devnet USDC mint authority. */
export function devnetSolanaMintAuthority(): Promise<DevnetSolanaKey> {
  return derive("mint-authority", 0);
}
