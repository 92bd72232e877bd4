/**
 * Writes docs/configuration.md from the variable catalogues that sit beside
 * each parser (src/config/variables.ts, auth.ts, confidential.ts, and every
 * family's src/chains/<family>/config.ts), so the reference is the code's own
 * word. src/config/configDocs.test.ts fails when the file differs from what
 * this writes, or when the source reads a variable no catalogue lists.
 *
 *   npm run docs:config
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { format, resolveConfig } from "prettier";
import { VARIABLES as SERVICE_VARIABLES } from "../src/config/index.js";
import { VARIABLES as AUTH_VARIABLES } from "../src/config/auth.js";
import { VARIABLES as VAULT_VARIABLES } from "../src/config/confidential.js";
import { FAMILIES, NAMESPACES, type Namespace } from "../src/chains/index.js";
import type { ConfigVariable } from "../src/lib/envVars.js";

export const CONFIGURATION_DOC = fileURLToPath(
  new URL("../docs/configuration.md", import.meta.url),
);

/** Each family's page under docs/chains/ (a new family without one does not compile). */
const FAMILY_PAGES: Record<Namespace, string> = {
  eip155: "chains/evm.md",
  solana: "chains/solana.md",
  xrpl: "chains/xrpl.md",
  near: "chains/near.md",
  starknet: "chains/starknet.md",
};

export interface Section {
  readonly title: string;
  /** One paragraph above the table; Markdown, links relative to docs/. */
  readonly intro: string;
  readonly variables: readonly ConfigVariable[];
}

/** The sections of docs/configuration.md, in order: the service's, then one per family. */
export function configurationSections(): Section[] {
  const families = NAMESPACES.map((ns): Section => {
    const entry = FAMILIES[ns];
    const networks = entry.networks.map((n) => `\`${n.id}\` (${n.name})`).join(", ");
    return {
      title: entry.label,
      intro:
        `Serves ${networks}. To serve it in production, set ${code(entry.config.hint)}. ` +
        `See [${entry.label}](${FAMILY_PAGES[ns]}).`,
      variables: entry.config.variables,
    };
  });
  return [
    {
      title: "Service",
      intro:
        "The mode, the listen address, logging, how long a settle waits and when an unfinished one is reconciled, ERC-8021 attribution, and devnet mode's own settings (`DEVNET_*`).",
      variables: SERVICE_VARIABLES.service,
    },
    {
      title: "HTTP and limits",
      intro:
        "Request size, proxies, browsers, and the two rate limits: per client IP, and per API key by the account's plan (see [Plans and keys](plans-and-keys.md#rate-limits)).",
      variables: SERVICE_VARIABLES.http,
    },
    {
      title: "Database and Redis",
      intro:
        "Without `DATABASE_URL` the service keeps everything in the embedded PGlite database, for one process; replicas share a PostgreSQL server, and Redis for one rate-limit count across them (see [Operations](operations.md)).",
      variables: SERVICE_VARIABLES.storage,
    },
    {
      title: "Plans",
      intro:
        "Monthly settlement quotas (the `free` plan's 10 is fixed; `payg` is unlimited), what the paid plans cost, and where they are paid in x402. See [Plans and keys](plans-and-keys.md).",
      variables: SERVICE_VARIABLES.plans,
    },
    {
      title: "Webhooks",
      intro: "See [Webhooks](webhooks.md).",
      variables: SERVICE_VARIABLES.webhooks,
    },
    {
      title: "Dashboard sign-in",
      intro:
        "`<ID>` stands for a provider id of `AUTH_PROVIDERS` in upper case, `-` written `_`: `AUTH_GITHUB_CLIENT_ID` for the id `github`. See [Dashboard](dashboard.md).",
      variables: AUTH_VARIABLES,
    },
    {
      title: "Confidential settlement",
      intro:
        "The service side of confidential settlement, with defaults. See [Confidential settlement](confidential.md).",
      variables: SERVICE_VARIABLES.confidential,
    },
    {
      title: "Confidential settlement: the vault",
      intro:
        "All or nothing: setting any of these requires the rest, and none set leaves confidential settlement off. Production only (devnet mode places its own vault and refuses them), and `EVM_RPC_URLS_8453` must be set too.",
      variables: VAULT_VARIABLES,
    },
    ...families,
  ];
}

/** Every catalogued variable, in the document's order. */
export function catalogue(): ConfigVariable[] {
  return configurationSections().flatMap((s) => s.variables);
}

function code(text: string): string {
  // The family hints are plain text naming variables; set the names as code.
  return text.replace(
    /\b[A-Z][A-Z0-9]*(?:_(?:[A-Z0-9]+|<[A-Za-z]+>))+(?:=[^\s)]*)?/g,
    (name) => `\`${name}\``,
  );
}

function cell(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

function row(v: ConfigVariable): string {
  const name = v.secret ? `\`${v.name}\` or \`${v.name}_FILE\`` : `\`${v.name}\``;
  const notes = [
    v.description,
    ...(v.secret
      ? [
          `A secret: never logged; give it as a file named by \`${v.name}_FILE\` (preferred) or inline, not both.`,
        ]
      : []),
    ...(v.example ? [`Example: \`${v.example}\`.`] : []),
  ];
  return `| ${name} | ${cell(v.default ?? "none")} | ${cell(notes.join(" "))} |`;
}

function render(): string {
  const sections = configurationSections();
  const lines = [
    "# Configuration",
    "",
    "Every environment variable the service reads, with its default and what it does. All configuration is environment variables, validated at start: a bad value stops the process (exit code 2) with a message naming the variable, never echoing a secret. With no chain configuration at all the service runs in devnet mode (local chains, embedded database); as soon as any family's RPC URL or key is set it runs in production mode, where a missing piece is an error, never a fall-back to devnet. This page is generated from the catalogues beside each parser (`src/config/*.ts`, `src/chains/<family>/config.ts`) by `npm run docs:config`: change those, not this file.",
    "",
    ...sections.map((s) => `- [${s.title}](#${slug(s.title)})`),
    "",
  ];
  for (const s of sections) {
    lines.push(`## ${s.title}`, "", s.intro, "");
    lines.push("| Variable | Default | What it does |", "| --- | --- | --- |");
    lines.push(...s.variables.map(row), "");
  }
  return lines.join("\n");
}

/** The anchor GitHub gives a heading. */
function slug(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, "")
    .replace(/ /g, "-");
}

/** docs/configuration.md as it should read, formatted as the repository formats Markdown. */
export async function configurationDoc(): Promise<string> {
  const options = (await resolveConfig(CONFIGURATION_DOC)) ?? {};
  return format(render(), { ...options, parser: "markdown" });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(CONFIGURATION_DOC, await configurationDoc());
  console.log(`wrote ${CONFIGURATION_DOC}`);
}
