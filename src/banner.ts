/**
 * What a person sees when the service starts: in devnet mode a loud banner,
 * a copy-paste curl and a paid-API example; in production a short summary.
 */
import type { Devnet } from "../devnet/index.js";
import type { SolanaNetworkInfo } from "../devnet/svm/index.js";
import type { XrplNetworkInfo } from "../devnet/xrpl/index.js";
import type { NearNetworkInfo } from "../devnet/near/index.js";
import type { StarknetNetworkInfo } from "../devnet/starknet/index.js";
import type { Service } from "./app.js";

const RULE = "=".repeat(78);

export function printDevnetBanner(opts: {
  url: string;
  apiKey: string;
  devnet: Devnet;
  file: string;
  dbKind: string;
  solana?: SolanaNetworkInfo;
  xrpl?: XrplNetworkInfo;
  near?: NearNetworkInfo;
  starknet?: StarknetNetworkInfo;
  /** The dashboard and its local sign-in providers. */
  dashboard?: { url: string; providers: string[] };
}): void {
  const { url, apiKey, devnet, file } = opts;
  const nets = [
    ...Object.entries(devnet.networks).map(
      ([id, n]) =>
        `    ${id.padEnd(16)} ${n.rpcUrl}   ${Object.entries(n.assets)
          .map(([symbol, address]) => `${symbol} ${address}`)
          .join(", ")}`,
    ),
    ...(opts.solana
      ? [
          `    ${"solana:5eykt4…".padEnd(16)} ${opts.solana.rpcUrl}   USDC ${opts.solana.assets.USDC}`,
        ]
      : []),
    ...(opts.xrpl
      ? [
          `    ${"xrpl:0".padEnd(16)} ${opts.xrpl.wsUrl}   XRP, RLUSD ${opts.xrpl.assets.RLUSD.issuer}`,
        ]
      : []),
    ...(opts.near
      ? [`    ${"near:mainnet".padEnd(16)} ${opts.near.rpcUrl}   USDC ${opts.near.asset}`]
      : []),
    ...(opts.starknet
      ? [
          `    ${"starknet:SN_MAIN".padEnd(16)} ${opts.starknet.rpcUrl}   USDC ${opts.starknet.assets.USDC}`,
        ]
      : []),
  ].join("\n");
  const lines = [
    "",
    RULE,
    "  DEVNET MODE: local chains, test keys, no real money. Not for production.",
    RULE,
    `  facilitator   ${url}`,
    `  api key       ${apiKey}`,
    `  database      ${opts.dbKind === "pglite" ? "embedded (PGlite)" : "PostgreSQL"}`,
    `  devnet file   ${file}   (RPC URLs, funded payer keys, this key)`,
    "  chains:",
    nets,
    "",
    ...(opts.dashboard
      ? [
          `  dashboard     ${opts.dashboard.url}`,
          `    sign in with ${opts.dashboard.providers.join(" or ")}: any name and password (local test providers)`,
          "",
        ]
      : []),
    "  Try it:",
    `    curl -s ${url}/supported`,
    "",
    "  Charge for an API (Express + the official x402 packages):",
    "    npx tsx examples/paid-api.ts      # a paid GET /weather on :4021",
    "    npx tsx examples/pay.ts           # pays it with a devnet payer key",
    "",
    "  In your own server, swap only the facilitator client:",
    `    new HTTPFacilitatorClient({ url: "${url}",`,
    `      createAuthHeaders: async () => ({ verify: { "X-API-Key": KEY }, settle: { "X-API-Key": KEY }, supported: {} }) })`,
    RULE,
    "",
  ];
  process.stderr.write(lines.join("\n") + "\n");
}

export function printProductionBanner(opts: {
  url: string;
  service: Service;
  networks: string[];
}): void {
  const signers = opts.service.facilitator.supported().signers;
  opts.service.log.info(
    { url: opts.url, networks: opts.networks, signers, database: opts.service.dbKind },
    "x402 facilitator listening",
  );
}
