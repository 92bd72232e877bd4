import type { Hex, PublicClient } from "viem";

/**
 * Account code, read once per block: the mechanism asks for a payer's code
 * twice per verification (ERC-6492 classification, then signature routing).
 * Code that exists is kept (contracts are not removed); "no code" is only
 * trusted for the block it was read in, since a wallet may be deployed.
 */
export class CodeCache {
  private readonly entries = new Map<string, { block: bigint; code: Hex | undefined }>();
  /** Reads under way, by address and block: concurrent payments of one payer share one. */
  private readonly reading = new Map<string, Promise<Hex | undefined>>();

  constructor(private readonly client: PublicClient) {}

  async get(address: Hex): Promise<Hex | undefined> {
    const key = address.toLowerCase();
    const block = await this.client.getBlockNumber();
    const hit = this.entries.get(key);
    if (hit && ((hit.code && hit.code !== "0x") || hit.block === block)) return hit.code;
    const readKey = `${key}@${block}`;
    const pending = this.reading.get(readKey);
    if (pending) return pending;
    const read = this.client
      .getCode({ address })
      .then((code) => {
        if (this.entries.size > 100_000) this.entries.clear();
        this.entries.set(key, { block, code });
        return code;
      })
      .finally(() => this.reading.delete(readKey));
    this.reading.set(readKey, read);
    return read;
  }
}
