/**
 * The configuration's front door: the type, the loader and the variables
 * catalogue, each in its own module (./types.ts, ./load.ts, ./variables.ts,
 * with the environment's shape in ./schema.ts), re-exported here so callers
 * import one path.
 */
export { ConfigError } from "../lib/configError.js";
export type { AuthProviderConfig } from "./auth.js";
export type { Config } from "./types.js";
export { loadConfig } from "./load.js";
export { DEVNET_BILLING_PAY_TO } from "./schema.js";
export { VARIABLES } from "./variables.js";
