/**
 * What the devnet puts on a fresh local Solana ledger: USDC at its real
 * mainnet mint address (6 decimals), funded payer token accounts, a token
 * account for the example payTo, and fee payers with SOL. Accounts are
 * written in their real SPL layouts, so the Token program treats them as its
 * own.
 */
import { address, lamports, none, some, type Address } from "@solana/kit";
import {
  AccountState,
  TOKEN_PROGRAM_ADDRESS,
  findAssociatedTokenPda,
  getMintEncoder,
  getMintSize,
  getTokenEncoder,
  getTokenSize,
} from "@solana-program/token";
import type { SolanaLedger } from "./ledger.js";

export const SOLANA_MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
export const USDC_MINT = address("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");

export async function associatedTokenAccount(owner: Address, mint: Address = USDC_MINT) {
  const [ata] = await findAssociatedTokenPda({ owner, mint, tokenProgram: TOKEN_PROGRAM_ADDRESS });
  return ata;
}

export function createMint(
  ledger: SolanaLedger,
  mint: Address,
  authority: Address,
  supply: bigint,
) {
  const data = getMintEncoder().encode({
    mintAuthority: some(authority),
    supply,
    decimals: 6,
    isInitialized: true,
    freezeAuthority: none(),
  });
  ledger.svm.setAccount({
    address: mint,
    data: new Uint8Array(data),
    executable: false,
    lamports: lamports(ledger.svm.minimumBalanceForRentExemption(BigInt(getMintSize()))),
    programAddress: TOKEN_PROGRAM_ADDRESS,
    space: BigInt(getMintSize()),
  });
}

/** Writes an initialized associated token account holding `amount`. */
export async function createTokenAccount(
  ledger: SolanaLedger,
  owner: Address,
  amount: bigint,
  mint: Address = USDC_MINT,
): Promise<Address> {
  const ata = await associatedTokenAccount(owner, mint);
  writeTokenAccount(ledger, ata, owner, amount, mint);
  return ata;
}

/**
 * Writes token account `ata` of `owner` holding `amount`, at once (no
 * derivation to wait for): tests also use it to move a payer's funds just
 * before the ledger executes a transaction.
 */
export function writeTokenAccount(
  ledger: SolanaLedger,
  ata: Address,
  owner: Address,
  amount: bigint,
  mint: Address = USDC_MINT,
): void {
  const data = getTokenEncoder().encode({
    mint,
    owner,
    amount,
    delegate: none(),
    state: AccountState.Initialized,
    isNative: none(),
    delegatedAmount: 0n,
    closeAuthority: none(),
  });
  ledger.svm.setAccount({
    address: ata,
    data: new Uint8Array(data),
    executable: false,
    lamports: lamports(ledger.svm.minimumBalanceForRentExemption(BigInt(getTokenSize()))),
    programAddress: TOKEN_PROGRAM_ADDRESS,
    space: BigInt(getTokenSize()),
  });
}
