/**
 * A verify thread: the EVM family and the protocol engine built a second
 * time, from the same setup and through the same factories as the service's
 * own, answering EVM verifications so they run on another core.
 *
 * Why it is safe to answer here: verification only reads (the chain, and
 * caches of what the chain said). This copy never starts its signer pool,
 * holds no leases, has no journal and no pending-settlement store, so it
 * cannot send a transaction or write anything; the service settles only on
 * its own thread. The engine is built by `createFacilitator`, so every
 * extension and mechanism option the service registers is registered here
 * too.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { PendingSettlementStore } from "@x402/core/facilitator";
import { createLogger } from "../lib/logger.js";
import { describeError } from "../lib/errors.js";
import { ChainUnavailableError, noopJournal, type SignerLeases } from "../chains/ports.js";
import { createEvm } from "../chains/evm/createEvm.js";
import { createFacilitator } from "./createFacilitator.js";
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
  const evm = await createEvm(
    input.evm,
    { ...input.evmSettings, pendingSettlementStore: noPendingStore },
    {
      log,
      journal: noopJournal,
      leases: { port: noLeases, holder: "verify-thread" },
      settleTimeoutMs: input.settleTimeoutMs,
      onSignerHealth: () => {},
      ...(input.pollingIntervalMs !== undefined
        ? { pollingIntervalMs: input.pollingIntervalMs }
        : {}),
    },
  );
  return createFacilitator([evm], input.facilitator, log);
}

try {
  const facilitator = await build();
  port.on("message", (message: ToVerifyThread) => {
    facilitator.verify(message.request).then(
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
