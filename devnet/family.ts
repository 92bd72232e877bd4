/**
 * The shape of a family's devnet descriptor (devnet/<family>/service.ts):
 * how its local ledger starts, and the one mapping from a running ledger to
 * what the service is given to serve it. The devnet (devnet/families.ts),
 * and the test stack (test/support/stack.ts) go through it, so none of them names a family and
 * a change to a family's setup is made once, in its own folder.
 */
import type { ChainSetups } from "../src/chains/index.js";

/** A started local ledger: what the devnet file holds of it, and how it stops. */
export interface RunningDevnetLedger {
  info: { rpcUrl: string };
  stop(): Promise<unknown>;
}

/**
 * One family's devnet. `R` is the running ledger the mapping reads; `S` what
 * `start` gives (the same, or more: an in-process ledger the tests can
 * drive); `O` the start options.
 */
export interface DevnetFamily<R extends RunningDevnetLedger, O extends object, S extends R = R> {
  /** The family's key in `ChainSetups` (and `src/chains/index.ts`). */
  namespace: string;
  /** The network its ledger serves. */
  network: string;
  /** What starts, for devnet mode's progress line. */
  what: string;
  /** Starts the ledger in this process. */
  start(opts: O): Promise<S>;
  /**
   * The start options of the test stack unless a test says otherwise: a
   * quicker pace than devnet mode's, which keeps to a public chain's.
   */
  quick: O;
  /** How devnet mode starts it, when not as `start({})` (in a process of its own, say). */
  boot?(): Promise<R>;
  /** The setup entry; `rpcUrl` replaces the ledger's own (a proxy in tests). */
  setup(running: R, rpcUrl?: string): ChainSetups;
  /** The same as production configuration variables (a service started on its own). */
  env?(running: R): Record<string, string>;
  /** Its line in the start-up banner: the RPC URL and the assets. */
  banner(running: R): string;
}
