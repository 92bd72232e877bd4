/**
 * The port through which a signer pool learns which of its accounts it may
 * use right now. With one replica it holds them all; with several sharing a
 * database, each holds a fair share, and a dead replica's share passes to the
 * others when its leases expire. Implemented on the database in
 * features/signers.
 */
export interface SignerLeases {
  /**
   * Renews this holder's leases and takes or gives up accounts to reach a
   * fair share. `releasable` are held accounts with nothing in flight.
   * Returns the addresses (lower-case) this holder may use until the next call.
   */
  sync(args: {
    network: string;
    addresses: readonly string[];
    holder: string;
    ttlMs: number;
    releasable: readonly string[];
  }): Promise<string[]>;
  /** Gives up every lease of this holder (clean shutdown). */
  releaseAll(holder: string): Promise<void>;
}
