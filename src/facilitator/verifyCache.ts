/**
 * Verification answers, reused within one block.
 *
 * A verdict depends on the payload, the requirements, the chain state and
 * the clock. Within one block the chain state is fixed, and the time checks
 * of the mechanism keep a margin of several seconds, so the same request
 * verified again in the same block gets the same answer: serving it from
 * memory spares a simulation round trip. A new block invalidates everything.
 */
import { createHash } from "node:crypto";
import stringify from "safe-stable-stringify";
import type { VerifyResponse } from "@x402/core/types";

export class PerBlockVerifyCache {
  private block: bigint | undefined;
  private readonly entries = new Map<string, Promise<VerifyResponse>>();

  constructor(private readonly maxEntries = 50_000) {}

  static keyOf(payload: unknown, requirements: unknown): string {
    return createHash("sha256")
      .update(stringify({ payload, requirements }) ?? "")
      .digest("base64");
  }

  /** The answer for `key` at `block`, computing it once per block. */
  get(block: bigint, key: string, compute: () => Promise<VerifyResponse>): Promise<VerifyResponse> {
    if (block !== this.block) {
      this.block = block;
      this.entries.clear();
    }
    const hit = this.entries.get(key);
    if (hit) return hit;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    const pending = compute();
    this.entries.set(key, pending);
    // A thrown verification (RPC failure) must be retried, not remembered.
    pending.catch(() => this.entries.delete(key));
    return pending;
  }
}
