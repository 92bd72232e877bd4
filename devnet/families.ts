/**
 * The devnet's local ledger of each chain family other than the base one
 * (`BASE_DEVNET` below, whose chains start together), keyed by namespace as
 * `src/chains/index.ts` keys the families: each entry is the family's devnet
 * descriptor (devnet/<family>/service.ts), which says how to start its
 * ledger, what the service is given to serve it and its line in the
 * start-up banner. Devnet mode, `npm run devnet`, the test stack, the
 * benchmarks and the chaos run all read this table, so a new family's
 * devnet is its folder and one line here; the table is a record over the
 * family table's namespaces, so a family without its line does not compile.
 */
import type { ChainSetups, Namespace } from "../src/chains/index.js";
import type { DevnetFamily, RunningDevnetLedger } from "./family.js";
import { solanaService } from "./svm/service.js";
import { xrplService } from "./xrpl/service.js";
import { nearService } from "./near/service.js";
import { starknetService } from "./starknet/service.js";
import { evmService } from "./evm/service.js";

/**
 * The family whose chains every devnet runs, whatever else it is asked for
 * (devnet mode, the test stack): EVM's anvil chains, several started
 * together, so its descriptor (devnet/evm/service.ts) has a shape of its
 * own rather than a line in the table below.
 */
export const BASE_DEVNET = evmService;

/** Every family's namespace but the base family's: the families with a ledger of their own. */
type LedgerNamespace = Exclude<Namespace, typeof BASE_DEVNET.namespace>;

export const DEVNET_FAMILIES = {
  solana: solanaService,
  xrpl: xrplService,
  near: nearService,
  starknet: starknetService,
} as const satisfies { [N in LedgerNamespace]: AnyDevnetFamily & { namespace: N } };
/** The base family's running chains. */
export type RunningBase = Awaited<ReturnType<typeof BASE_DEVNET.start>>;

/** A namespace that has a local ledger. */
export type DevnetNamespace = keyof typeof DEVNET_FAMILIES;
/** What a family's `start` gives: its running ledger, to drive in tests. */
export type RunningOf<N extends DevnetNamespace> = Awaited<
  ReturnType<(typeof DEVNET_FAMILIES)[N]["start"]>
>;
/** A family's start options. */
export type StartOptionsOf<N extends DevnetNamespace> = NonNullable<
  Parameters<(typeof DEVNET_FAMILIES)[N]["start"]>[0]
>;

/** Any family's descriptor, with its types forgotten: what a loop over the table sees. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyDevnetFamily = DevnetFamily<any, any, any>;

/** The table's entries, in order, for a loop that does not care which family is which. */
export const devnetFamilies = (): [DevnetNamespace, AnyDevnetFamily][] =>
  Object.entries(DEVNET_FAMILIES) as [DevnetNamespace, AnyDevnetFamily][];

/** A started ledger, as the devnet boot keeps it. */
export interface RunningLedger {
  network: string;
  /** What `.devnet/devnet.json` holds under `networks[network]`. */
  info: object;
  /** Its family's namespace, which is also the pay example's `--network` name for it. */
  namespace: Namespace;
  /** The service's setup for this family. */
  setup: ChainSetups;
  /** Its line in the banner: the RPC URL and the assets. */
  banner: string;
  stop(): Promise<unknown>;
}

/** Starts a family's ledger as devnet mode runs it, through its descriptor. */
export async function bootLedger(family: AnyDevnetFamily): Promise<RunningLedger> {
  const ledger = (await (family.boot ? family.boot() : family.start({}))) as RunningDevnetLedger;
  return {
    network: family.network,
    namespace: family.namespace,
    info: ledger.info,
    setup: family.setup(ledger),
    banner: family.banner(ledger),
    stop: () => ledger.stop(),
  };
}
