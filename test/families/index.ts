/** Every chain family the one-delivery suite runs against. */
import type { FamilyAdapter } from "./adapter.js";
import { evm } from "./evm.js";
import { near } from "./near.js";
import { solana } from "./solana.js";
import { starknet } from "./starknet.js";
import { xrpl } from "./xrpl.js";

export type { FamilyAdapter } from "./adapter.js";

export const families: readonly FamilyAdapter[] = [evm, solana, near, xrpl, starknet];
