/**
 * The shape of a family's devnet descriptor (devnet/<family>/service.ts):
 * how its local ledger starts, and the one mapping from a running ledger to
 * what the service is given to serve it. The devnet (devnet/families.ts),
 * the test stack (test/support/stack.ts) and the benchmarks
 * (bench/families.ts) all go through it, so none of them names a family and
 * a change to a family's setup is made once, in its own folder.
 */
import type { PaymentRequirements } from "@x402/core/types";
import type { ChainSetups, Namespace } from "../src/chains/index.js";

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
  /**
   * The family's key in `ChainSetups` and in `src/chains/index.ts`; also its
   * `--network` name in the pay example (examples/devnet.ts takes every
   * namespace).
   */
  namespace: Namespace;
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
  /**
   * The same as production configuration variables, for a service started
   * on its own (the chaos run's processes, the benchmarks'); `rpcUrl`
   * replaces the ledger's own, as in `setup`.
   */
  env(running: R, rpcUrl?: string): Record<string, string>;
  /** Its line in the start-up banner: the RPC URL and the assets. */
  banner(running: R): string;
  /**
   * The settle benchmark's side of the family (devnet/<family>/bench.ts,
   * loaded only by the benchmarks): its ledger started with `payers` payers
   * at `blockMs`, and the client scheme, balance and timing the bench reads.
   */
  bench?(payers: number, blockMs: number): Promise<BenchLedger>;
}

/** A family's ledger as the settle benchmark drives it. */
export interface BenchLedger {
  title: string;
  network: string;
  /** How the ledger runs, the payers and the service's keys, for the report's header. */
  setup: string;
  /**
   * Transactions the ledger includes per block, from its code; undefined
   * when it has no limit (every transaction waiting goes into the next
   * block), and then the ceiling is ours, not the ledger's.
   */
  perBlock: number | undefined;
  /** The service's environment for this family alone. */
  env: Record<string, string>;
  /** Able to receive the asset (registered with the token, or a trust line, where the ledger asks). */
  payTo: string;
  asset: string;
  amount: string;
  extra: Record<string, unknown>;
  /** What each payment allows; undefined for the bench's default. */
  maxTimeoutSeconds?: number;
  /**
   * Its payments stay valid for the whole run, so the bench signs every one
   * before the run instead of just ahead of its turn (where one lapses a few
   * ledgers after it is signed, as on the XRP Ledger, it must not).
   */
  signedBeforeRun?: boolean;
  /** Signs the `i`th payment with the project's own client scheme (a payer of its own where one is needed). */
  sign(i: number, requirements: PaymentRequirements): Promise<{ payload: Record<string, unknown> }>;
  /** The payTo's balance on the ledger, in the asset's units, as a decimal string. */
  balance(): string | Promise<string>;
  /** When (performance.now()) the block that included `transaction` closed, where the ledger tells. */
  includedAt?: (transaction: string) => number | undefined;
  stop(): Promise<unknown>;
}
