/**
 * Small answers every chain family gives the same way, kept in one place so
 * families differ only where their chains do.
 */
import { Reason } from "../protocol/reasons.js";
import type { PaymentPayload } from "@x402/core/types";
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

/**
 * A chain read shared by everyone who asks within `maxAgeMs` (the latest
 * block, slot or ledger): under load one request to the node serves them
 * all. A failed read is forgotten at once, so the next caller asks again.
 */
export class RecentRead<T> {
  private last: { value: Promise<T>; at: number } | undefined;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly maxAgeMs: number,
  ) {}

  get(): Promise<T> {
    if (!this.last || Date.now() - this.last.at >= this.maxAgeMs) {
      const value = this.read();
      const entry = { value, at: Date.now() };
      this.last = entry;
      value.catch(() => {
        if (this.last === entry) this.last = undefined;
      });
    }
    return this.last.value;
  }
}

/**
 * The top level of a payload is strict in every family: a field its
 * mechanism does not read is refused with a 400 that names it, so nothing
 * beside what is verified (a payer named in a field nobody checks, say)
 * can reach the records. Undefined when every field is one of `fields`.
 */
export function unknownPayloadField(
  payload: PaymentPayload,
  fields: readonly string[],
): string | undefined {
  const body = payload.payload as Record<string, unknown> | null | undefined;
  if (!body || typeof body !== "object") return undefined;
  const extra = Object.keys(body).find((k) => !fields.includes(k));
  return extra === undefined
    ? undefined
    : `paymentPayload.payload.${extra.slice(0, 64)} is not a field of this scheme's payload (it holds only ${fields.join(", ")})`;
}
