/**
 * Reads a token's EIP-712 domain (name, version) from the chain, once per
 * token, and checks it against the token's own DOMAIN_SEPARATOR.
 *
 * Resource servers send `extra.name`/`extra.version` with their requirements;
 * when they leave them out we fill them in from here, and when they send a
 * value the token does not use we can say so plainly instead of reporting a
 * bare "invalid signature".
 */
import { hashDomain, parseAbi, type Address, type Hex, type PublicClient } from "viem";

const TOKEN_ABI = parseAbi([
  "function name() view returns (string)",
  "function version() view returns (string)",
  "function DOMAIN_SEPARATOR() view returns (bytes32)",
]);

export interface TokenDomain {
  name: string;
  version: string;
  /** True when (name, version, chainId, address) hashes to the token's DOMAIN_SEPARATOR. */
  confirmed: boolean;
}

export class TokenDomainCache {
  private readonly domains = new Map<string, Promise<TokenDomain | null>>();

  constructor(
    private readonly client: PublicClient,
    private readonly chainId: number,
  ) {}

  /** The token's domain, or null when the token exposes none (not EIP-712). */
  get(asset: Address): Promise<TokenDomain | null> {
    const key = asset.toLowerCase();
    let pending = this.domains.get(key);
    if (!pending) {
      pending = this.read(asset);
      // A failed read (RPC hiccup) must not be cached forever.
      pending.catch(() => this.domains.delete(key));
      this.domains.set(key, pending);
    }
    return pending;
  }

  private async read(asset: Address): Promise<TokenDomain | null> {
    const call = <T>(functionName: "name" | "version" | "DOMAIN_SEPARATOR") =>
      this.client.readContract({ address: asset, abi: TOKEN_ABI, functionName }) as Promise<T>;
    const [name, version, separator] = await Promise.all([
      call<string>("name").catch(() => null),
      call<string>("version").catch(() => null),
      call<Hex>("DOMAIN_SEPARATOR").catch(() => null),
    ]);
    if (name === null || version === null) return null;
    const computed = hashDomain({
      domain: { name, version, chainId: BigInt(this.chainId), verifyingContract: asset },
      types: {
        EIP712Domain: [
          { name: "name", type: "string" },
          { name: "version", type: "string" },
          { name: "chainId", type: "uint256" },
          { name: "verifyingContract", type: "address" },
        ],
      },
    });
    return {
      name,
      version,
      confirmed: separator !== null && separator.toLowerCase() === computed.toLowerCase(),
    };
  }
}
