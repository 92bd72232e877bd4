/**
 * What a person sees when `npm start` runs the devnet: a loud banner naming
 * the local chains and test keys, then the three things to try next (pay,
 * see it in the dashboard, read the API), and nothing after them, so the
 * last lines on the screen are where to go.
 */

const RULE = "=".repeat(78);

export interface DevnetBanner {
  url: string;
  apiKey: string;
  /** The account that owns the key (and that devnet sign-ins join). */
  account: string;
  /**
   * One line per local chain: its network id, RPC URL and assets, and the
   * pay example's `--network` name for it when it is not the example's
   * default (its family's namespace, which examples/devnet.ts takes).
   */
  chains: readonly { network: string; line: string; example?: string }[];
  file: string;
  dbKind: string;
  /** The dashboard and its sign-in providers (`local`: the devnet's own, any name and password). */
  dashboard: { url: string; providers: string[]; local: boolean };
}

export function devnetBanner(opts: DevnetBanner): string {
  const { url, apiKey, file } = opts;
  const nets = opts.chains
    .map(({ network, line }) => `    ${short(network).padEnd(16)} ${line}`)
    .join("\n");
  const others = opts.chains.flatMap((c) => (c.example === undefined ? [] : [c.example]));
  // The examples read .devnet/devnet.json unless told: a devnet writing
  // elsewhere (one run beside another) names its file in the commands.
  const env = file === ".devnet/devnet.json" ? "" : `DEVNET_FILE=${file} `;
  const pay = `${env}npx tsx examples/pay.ts`;
  const lines = [
    "",
    RULE,
    "  DEVNET MODE: local chains, test keys, no real money. Not for production.",
    RULE,
    `  facilitator   ${url}`,
    `  api key       ${apiKey}   (account "${opts.account}")`,
    `  database      ${opts.dbKind === "pglite" ? "embedded (PGlite)" : "PostgreSQL"}`,
    `  devnet file   ${file}   (RPC URLs, funded payer keys, this key)`,
    "  chains:",
    nets,
    "",
    "  Try:",
    `  1. Pay for an API    ${env}npx tsx examples/paid-api.ts   # terminal 2: GET :4021/weather, $0.001`,
    `                       ${pay}${others.length > 0 ? ` [--network ${others.join("|")}]` : ""}   # terminal 3: pays it`,
    `  2. See it paid       ${opts.dashboard.url}`,
    `                       sign in with ${opts.dashboard.providers.join(" or ")}${opts.dashboard.local ? ": any name and password" : ""}`,
    `  3. Read the API      ${url}/openapi.json   (or docs/http-api.md)`,
    RULE,
    "",
  ];
  return lines.join("\n");
}

export function printDevnetBanner(opts: DevnetBanner): void {
  process.stderr.write(devnetBanner(opts) + "\n");
}

/** A network id short enough for the banner's column. */
function short(network: string): string {
  return network.length > 16 ? `${network.slice(0, 13)}…` : network;
}
