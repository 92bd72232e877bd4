/**
 * One lane per facilitator account: its next nonce, handed out locally so
 * any number of concurrent settlements pipeline into the mempool instead of
 * colliding, and whether the account may be used now (gas balance, lease).
 */
import type { Hex, PublicClient } from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { createNativeTransactionSigner } from "../native/nativeTransactionSigner.js";
import { NoHealthySignerError, SignerUnavailableError } from "./broadcastErrors.js";

export interface Lane {
  account: PrivateKeyAccount;
  sign: ReturnType<typeof createNativeTransactionSigner>;
  next: number | undefined;
  init: Promise<void> | undefined;
  healthy: boolean;
  /** Whether this replica holds the account's lease (always true without leasing). */
  leased: boolean;
}

export class NonceLanes {
  readonly lanes: Lane[];
  readonly addresses: readonly `0x${string}`[];
  private cursor = 0;

  constructor(
    private readonly network: string,
    private readonly client: PublicClient,
    privateKeys: readonly Hex[],
    leased: boolean,
  ) {
    this.lanes = privateKeys.map((k) => ({
      account: privateKeyToAccount(k),
      sign: createNativeTransactionSigner(k),
      next: undefined,
      init: undefined,
      healthy: true,
      leased,
    }));
    this.addresses = this.lanes.map((l) => l.account.address);
  }

  /** The next usable account, round robin. */
  pick(): Lane {
    for (let i = 0; i < this.lanes.length; i++) {
      const lane = this.lanes[(this.cursor + i) % this.lanes.length]!;
      if (lane.healthy && lane.leased) {
        this.cursor = (this.cursor + i + 1) % this.lanes.length;
        return lane;
      }
    }
    throw new NoHealthySignerError(this.network);
  }

  /**
   * The lane of one named account. Some contracts accept a call only from the
   * facilitator the payer signed for (the upto proxy), so that account, and
   * no other, must send it.
   */
  named(address: Hex): Lane {
    const lane = this.lanes.find((l) => l.account.address.toLowerCase() === address.toLowerCase());
    if (!lane) {
      throw new SignerUnavailableError(
        this.network,
        address,
        "is not one of this service's accounts",
      );
    }
    if (!lane.leased) {
      throw new SignerUnavailableError(
        this.network,
        address,
        "is in use by another replica right now; retry",
      );
    }
    if (!lane.healthy) {
      throw new SignerUnavailableError(this.network, address, "is below its minimum gas balance");
    }
    return lane;
  }

  async takeNonce(lane: Lane): Promise<number> {
    if (lane.next === undefined) await this.resync(lane);
    return lane.next!++;
  }

  /** Reads the account's pending nonce from the chain (once, however many ask at once). */
  async resync(lane: Lane): Promise<void> {
    lane.init ??= this.client
      .getTransactionCount({ address: lane.account.address, blockTag: "pending" })
      .then((n) => {
        lane.next = n;
      })
      .finally(() => (lane.init = undefined));
    await lane.init;
  }

  /** Forget the local nonce: the next use reads it from the chain. */
  forget(lane: Lane): void {
    lane.next = undefined;
  }
}
