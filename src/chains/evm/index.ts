/**
 * The EVM family: registers the official `@x402/evm` exact mechanism for each
 * configured network, with this service's signer, and adds the per-chain
 * checks the mechanism leaves to the operator.
 */
import type { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { isAddress, type Hex, type PublicClient } from "viem";
import { findEvmNetwork, type EvmNetwork } from "../../networks/registry.js";
import { Reason } from "../../lib/reasons.js";
import type { ChainAdapter, PreparedPayment } from "../types.js";
import { evmExactPayloadShapeError } from "./payloadShape.js";
import { createEvmPublicClient } from "./rpc.js";
import { createEvmSigner } from "./signer.js";
import { TokenDomainCache } from "./tokenDomain.js";

export interface EvmNetworkSetup {
  id: string;
  rpcUrls: readonly string[];
}

export interface RegisterEvmOptions {
  networks: readonly EvmNetworkSetup[];
  privateKeys: readonly Hex[];
  confirmationTimeoutMs: number;
  /** Receipt polling interval; defaults to a quarter of the block time. */
  pollingIntervalMs?: number;
}

interface EvmNetworkRuntime {
  network: EvmNetwork;
  client: PublicClient;
  domains: TokenDomainCache;
  signerAddresses: readonly string[];
}

export class EvmChainAdapter implements ChainAdapter {
  readonly family = "eip155";
  private readonly runtimes = new Map<string, EvmNetworkRuntime>();
  private readonly schemes = new Map<string, readonly string[]>();

  constructor(facilitator: x402Facilitator, opts: RegisterEvmOptions) {
    for (const setup of opts.networks) {
      const network = findEvmNetwork(setup.id);
      if (!network) throw new Error(`unknown EVM network ${setup.id}`);
      const polling = opts.pollingIntervalMs ?? Math.max(50, Math.floor(network.blockTimeMs / 4));
      const client = createEvmPublicClient(network, setup.rpcUrls, polling);
      const { signer, addresses } = createEvmSigner({
        network,
        rpcUrls: setup.rpcUrls,
        publicClient: client,
        privateKeys: opts.privateKeys,
        confirmationTimeoutMs: opts.confirmationTimeoutMs,
      });
      // One mechanism instance per network: a signer is bound to one chain.
      facilitator.register(network.id, new ExactEvmScheme(signer));
      this.schemes.set(network.id, ["exact"]);
      this.runtimes.set(network.id, {
        network,
        client,
        domains: new TokenDomainCache(client, network.chainId),
        signerAddresses: addresses,
      });
    }
  }

  networks(): ReadonlyMap<string, readonly string[]> {
    return this.schemes;
  }

  signerAddresses(): string[] {
    const all = new Set<string>();
    for (const r of this.runtimes.values()) r.signerAddresses.forEach((a) => all.add(a));
    return [...all];
  }

  publicClient(networkId: string): PublicClient | undefined {
    return this.runtimes.get(networkId)?.client;
  }

  shapeError(payload: PaymentPayload, requirements: PaymentRequirements): string | undefined {
    if (requirements.scheme !== "exact") return undefined;
    return evmExactPayloadShapeError(payload.payload as Record<string, unknown>);
  }

  async prepare(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    const runtime = this.runtimes.get(requirements.network);
    if (!runtime) {
      return {
        ok: false,
        reason: Reason.invalidNetwork,
        message: `network ${requirements.network} is not served`,
      };
    }
    if (!isAddress(requirements.asset, { strict: false })) {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "paymentRequirements.asset must be a 0x-prefixed 20-byte token address",
      };
    }
    if (!isAddress(requirements.payTo, { strict: false })) {
      return {
        ok: false,
        reason: Reason.invalidPaymentRequirements,
        message: "paymentRequirements.payTo must be a 0x-prefixed 20-byte address",
      };
    }
    const inner = payload.payload as Record<string, unknown>;
    if (!("authorization" in inner)) return { ok: true, requirements };
    return this.withTokenDomain(runtime, requirements);
  }

  /** Fills in or checks `extra.name` / `extra.version` against the token itself. */
  private async withTokenDomain(
    runtime: EvmNetworkRuntime,
    requirements: PaymentRequirements,
  ): Promise<PreparedPayment> {
    const domain = await runtime.domains.get(requirements.asset as Hex);
    if (!domain || !domain.confirmed) return { ok: true, requirements };
    const extra = requirements.extra ?? {};
    const name = typeof extra["name"] === "string" ? extra["name"] : undefined;
    const version = typeof extra["version"] === "string" ? extra["version"] : undefined;
    if (name !== undefined && name !== domain.name) {
      return {
        ok: false,
        reason: Reason.eip712DomainMismatch,
        message: `paymentRequirements.extra.name is "${name}" but the token's EIP-712 domain name is "${domain.name}"`,
      };
    }
    if (version !== undefined && version !== domain.version) {
      return {
        ok: false,
        reason: Reason.eip712DomainMismatch,
        message: `paymentRequirements.extra.version is "${version}" but the token's EIP-712 domain version is "${domain.version}"`,
      };
    }
    if (name !== undefined && version !== undefined) return { ok: true, requirements };
    return {
      ok: true,
      requirements: {
        ...requirements,
        extra: { ...extra, name: domain.name, version: domain.version },
      },
    };
  }

  async close(): Promise<void> {
    // viem HTTP clients hold no sockets open between requests.
  }
}
