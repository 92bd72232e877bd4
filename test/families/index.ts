/**
 * Every chain family the family suites and the chaos run go through, keyed
 * by namespace as src/chains/index.ts keys the families: a record over the
 * family table, so a family without its adapter does not compile.
 */
import type { Namespace } from "../../src/chains/index.js";
import type { FamilyAdapter } from "./adapter.js";
import { evm } from "./evm.js";
import { near } from "./near.js";
import { solana } from "./solana.js";
import { starknet } from "./starknet.js";
import { xrpl } from "./xrpl.js";

export type { FamilyAdapter } from "./adapter.js";

export const ADAPTERS = {
  eip155: evm,
  solana,
  xrpl,
  near,
  starknet,
} as const satisfies { [N in Namespace]: FamilyAdapter<N> };

/** The adapters in the family table's order. */
export const families: readonly FamilyAdapter[] = Object.values(ADAPTERS);
