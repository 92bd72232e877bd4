/**
 * A verify thread: the families that earn threads and the protocol engine
 * built a second time, from the same setup and through the same factories
 * as the service's own, answering their verifications on another core.
 *
 * Why it is safe to answer here: verification only reads (the chain, and
 * caches of what the chain said). This copy never starts its signer pool,
 * holds no leases, has no journal and no pending-settlement store, so it
 * cannot send a transaction or write anything; the service settles only on
 * its own thread. The engine is built by `assembleFacilitator`, so every
 * extension and mechanism option the service registers is registered here
 * too.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { PendingSettlementStore } from "@x402/core/facilitator";
import { createLogger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import { ChainUnavailableError, noopJournal, type SignerLeases } from "../chains/ports.js";
import { createFamilies } from "../chains/index.js";
import { assembleFacilitator } from "./assemble.js";
import type { FromVerifyThread, ToVerifyThread, VerifyThreadInput } from "./verifyThreadPool.js";

const input = workerData as VerifyThreadInput;
const port = parentPort!;

/** Anything that would write is a programming error in this thread. */
function refuse(what: string): never {
  throw new Error(`a verify thread never ${what}`);
}
const noLeases: SignerLeases = {
  sync: () => refuse("leases signing accounts"),
  releaseAll: async () => {},
};
const noPendingStore: PendingSettlementStore = {
  get: async () => undefined,
  set: async () => refuse("records a pending settlement"),
  delete: async () => refuse("clears a pending settlement"),
};

const log = createLogger(input.logLevel).child({ component: "verify-thread" });

async function build() {
  const families = await createFamilies(input.chains, input.settings, {
    log,
    journal: noopJournal,
    leases: { port: noLeases, holder: "verify-thread" },
    settleTimeoutMs: input.settleTimeoutMs,
    onSignerHealth: () => {},
    pendingSettlements: noPendingStore,
    ...(input.pollingIntervalMs !== undefined
      ? { pollingIntervalMs: input.pollingIntervalMs }
      : {}),
  });
  return assembleFacilitator(families, input.facilitator, log, input.networks);
}

try {
  const facilitator = await build();
  port.on("message", (message: ToVerifyThread) => {
    facilitator.verifyRequest(message.request).then(
      (value) =>
        port.postMessage({ kind: "answer", id: message.id, value } satisfies FromVerifyThread),
      (e: unknown) =>
        port.postMessage({
          kind: "error",
          id: message.id,
          error:
            e instanceof ChainUnavailableError
              ? { chainUnavailable: true, network: e.network, message: e.message }
              : { chainUnavailable: false, message: describeError(e) },
        } satisfies FromVerifyThread),
    );
  });
  port.postMessage({ kind: "ready" } satisfies FromVerifyThread);
} catch (e) {
  port.postMessage({ kind: "failed", message: describeError(e) } satisfies FromVerifyThread);
}
