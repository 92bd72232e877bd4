/**
 * Small answers every chain family gives the same way, kept in one place so
 * families differ only where their chains do.
 */
import { Reason } from "../lib/reasons.js";
import type { NetworkProbe, ReconcileOutcome } from "./ports.js";

/** A pending settlement on a network the family no longer serves. */
export function networkNotServed(network: string): ReconcileOutcome {
  return {
    status: "failed",
    reason: Reason.invalidNetwork,
    message: `network ${network} is no longer configured`,
  };
}

/**
 * A pending settlement with nothing in its journal: for families that
 * journal before every send, nothing was sent and nothing can land.
 */
export function nothingWasSent(): ReconcileOutcome {
  return {
    status: "failed",
    reason: Reason.settlementInterrupted,
    message: "the settlement was interrupted before anything was sent; nothing was transferred",
  };
}

/** Each network's reachability, by one cheap read each, all at once. */
export function probeNetworks(
  targets: readonly { network: string; host: string; read: () => Promise<unknown> }[],
): Promise<NetworkProbe[]> {
  return Promise.all(
    targets.map(async ({ network, host, read }) => {
      try {
        await read();
        return { network, reachable: true, host };
      } catch (e) {
        return { network, reachable: false, host, error: e instanceof Error ? e.name : "error" };
      }
    }),
  );
}
