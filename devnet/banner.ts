/**
 * What a person sees when `npm start` runs the devnet: a loud banner naming
 * the local chains and test keys, a copy-paste curl and a paid-API example.
 */

const RULE = "=".repeat(78);

export function printDevnetBanner(opts: {
  url: string;
  apiKey: string;
  /** One line per local chain: its network id, RPC URL and assets. */
  chains: readonly { network: string; line: string }[];
  file: string;
  dbKind: string;
  /** The dashboard and its local sign-in providers. */
  dashboard?: { url: string; providers: string[] };
}): void {
  const { url, apiKey, file } = opts;
  const nets = opts.chains
    .map(({ network, line }) => `    ${short(network).padEnd(16)} ${line}`)
    .join("\n");
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

/** A network id short enough for the banner's column. */
function short(network: string): string {
  return network.length > 16 ? `${network.slice(0, 13)}…` : network;
}
