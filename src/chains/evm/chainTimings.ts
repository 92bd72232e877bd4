/**
 * The EVM family's clocks, all derived from how often the chain makes a
 * block. The registry knows each mainnet's block time; an operator may say
 * otherwise (`EVM_BLOCK_TIME_MS_<chainId>`), and the devnet does, since its
 * anvil mines at its own pace, not Base's.
 */
export interface ChainTimings {
  /** viem's polling interval, and how long it trusts a block number. */
  pollMs: number;
  /**
   * The receipt watcher's tick. A settle is answered once its receipt is
   * seen, so every settle pays half a tick on average: a twentieth of the
   * block, one `eth_blockNumber` per tick, and only while a transaction is
   * waited for.
   */
  receiptTickMs: number;
  /** How long a fee quote is reused: half a block, at least 250 ms. */
  feeMaxAgeMs: number;
  /** A transaction not mined after three blocks (at least 5 s) is replaced. */
  stuckAfterMs: number;
}

export function chainTimings(
  blockTimeMs: number,
  overrides: { pollingIntervalMs?: number | undefined; stuckAfterMs?: number | undefined } = {},
): ChainTimings {
  return {
    pollMs: overrides.pollingIntervalMs ?? Math.max(25, Math.floor(blockTimeMs / 8)),
    receiptTickMs: overrides.pollingIntervalMs ?? Math.max(25, Math.floor(blockTimeMs / 20)),
    feeMaxAgeMs: Math.max(250, blockTimeMs / 2),
    stuckAfterMs: overrides.stuckAfterMs ?? Math.max(5_000, blockTimeMs * 3),
  };
}
