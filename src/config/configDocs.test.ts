/**
 * docs/configuration.md cannot drift from the code: it must be exactly what
 * `npm run docs:config` writes from the catalogues, and every variable the
 * source reads must be in a catalogue. Reads are found twice over: by
 * scanning src/ for each way a variable is read (which sees branches no run
 * reaches), and by running the parsers on a complete configuration through
 * an env that records every name asked for (which sees names built at run
 * time, such as `AUTH_GITHUB_CLIENT_ID` or a list of names looped over).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { CONFIGURATION_DOC, catalogue, configurationDoc } from "../../scripts/config-docs.js";
import { FAMILIES, NAMESPACES } from "../chains/index.js";
import type { ConfigVariable } from "../lib/envVars.js";
import { loadConfig } from "./index.js";

const SRC = fileURLToPath(new URL("../", import.meta.url));

/** What an environment variable's name looks like; other property reads are not variables. */
const VARIABLE_NAME = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|^[A-Z]{2,}$/;

/** A read found in the source: a name, or a pattern with `*` for what is computed. */
interface Read {
  readonly pattern: string;
  readonly where: string;
}

/** Every name a catalogue entry stands for: its own, and `<name>_FILE` for a secret. */
function documentedNames(variables: readonly ConfigVariable[]): string[] {
  return variables.flatMap((v) => (v.secret ? [v.name, `${v.name}_FILE`] : [v.name]));
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Whether a read is documented by a catalogued name. Either side may be a
 * pattern: a read's `*` (computed in the source) stands for anything,
 * `EVM_RPC_URLS_*` meeting `EVM_RPC_URLS_<chainId>`; a catalogued
 * `<placeholder>` stands for a name part, `AUTH_<ID>_KIND` meeting a run's
 * `AUTH_GITHUB_KIND`.
 */
function documents(name: string, read: string): boolean {
  const readAsRegex = new RegExp(`^${read.split("*").map(escape).join(".+")}$`);
  const nameAsRegex = new RegExp(
    `^${name
      .split(/<[A-Za-z]+>/)
      .map(escape)
      .join("[A-Z0-9_]+")}$`,
  );
  return readAsRegex.test(name) || nameAsRegex.test(read);
}

function undocumented(reads: readonly Read[], names: readonly string[]): string[] {
  return reads
    .filter((r) => !names.some((n) => documents(n, r.pattern)))
    .map((r) => `${r.pattern} (${r.where})`);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith(".ts") && !path.endsWith(".test.ts") ? [path] : [];
  });
}

/**
 * The variables a source file reads, as written: `env["NAME"]`,
 * `` env[`NAME_${x}`] ``, `readSecret(env, "NAME")` (NAME and NAME_FILE), the
 * name argument of the parsing helpers (`intVar("NAME", …)`, `whole(env,
 * "NAME", …)`), the keys of a zod schema of variables, and names matched
 * while looping over the environment (`/^NAME_(\d+)$/`).
 */
export function readsIn(source: string, where: string): Read[] {
  // Template parts that are names of local string constants are spelled out
  // (`const p = \`AUTH_${id}_\`` makes `${p}KIND` read AUTH_*_KIND); any
  // other computed part becomes `*`.
  const constants = new Map<string, string>();
  for (const m of source.matchAll(/\bconst (\w+) = `([^`]*)`;/g)) constants.set(m[1]!, m[2]!);
  for (const m of source.matchAll(/\bconst (\w+) = "([^"]*)";/g)) constants.set(m[1]!, m[2]!);
  const template = (text: string): string =>
    text
      .replace(/\$\{(\w+)\}/g, (whole, name: string) => constants.get(name) ?? whole)
      .replace(/\$\{[^}]*\}/g, "*")
      .replace(/\*+/g, "*");

  const patterns = new Set<string>();
  const add = (pattern: string) => patterns.add(pattern);
  for (const m of source.matchAll(/\benv\??\.?\[\s*"([A-Z][A-Z0-9_]*)"\s*\]/g)) add(m[1]!);
  for (const m of source.matchAll(/\benv\??\.?\[\s*`([^`]*)`\s*\]/g)) add(template(m[1]!));
  for (const m of source.matchAll(/\benv\??\.([A-Z][A-Z0-9_]*)\b/g)) add(m[1]!);
  for (const m of source.matchAll(/\breadSecret\(\s*(?:env\s*,\s*)?"([A-Z][A-Z0-9_]*)"/g)) {
    add(m[1]!);
    add(`${m[1]!}_FILE`);
  }
  for (const m of source.matchAll(/\breadSecret\(\s*(?:env\s*,\s*)?`([^`]*)`/g)) {
    add(template(m[1]!));
    add(`${template(m[1]!)}_FILE`);
  }
  for (const m of source.matchAll(/\b(?:intVar|optionalMs)\(\s*"([A-Z][A-Z0-9_]*)"/g)) add(m[1]!);
  for (const m of source.matchAll(/\(\s*env\s*,\s*"([A-Z][A-Z0-9_]*)"/g)) add(m[1]!);
  for (const m of source.matchAll(/=\s*z\.object\(\{([\s\S]*?)\n\}\);/g)) {
    for (const key of m[1]!.matchAll(/^\s*([A-Z][A-Z0-9_]*)\s*:/gm)) add(key[1]!);
  }
  for (const m of source.matchAll(/\/\^([A-Z][A-Z0-9_]*)(\(\\d\+\)|\(_FILE\)\?)?\$\//g)) {
    if (m[2] === "(\\d+)") add(`${m[1]!}*`);
    else {
      add(m[1]!);
      if (m[2]) add(`${m[1]!}_FILE`);
    }
  }
  return [...patterns].map((pattern) => ({ pattern, where }));
}

/** A complete production configuration: every family, sign-in of both kinds, the vault. */
function completeEnvironment(): Record<string, string> {
  const address = (n: number) => `0x${n.toString(16).padStart(40, "0")}`;
  return {
    EVM_RPC_URLS_8453: "https://base.example",
    EVM_MAX_GAS_PRICE_GWEI_8453: "5",
    EVM_BLOCK_TIME_MS_8453: "2000",
    EVM_PRIVATE_KEYS: `0x${"ab".repeat(32)}`,
    EVM_BATCH_AUTHORIZER_KEY: `0x${"cd".repeat(32)}`,
    SVM_RPC_URL: "https://solana.example",
    SVM_PRIVATE_KEYS: "5".repeat(87),
    XRPL_RPC_URL: "https://xrpl.example",
    NEAR_RPC_URL: "https://near.example",
    NEAR_RELAYER_KEYS: `relayer.near:ed25519:${"3".repeat(87)}`,
    STARKNET_RPC_URL: "https://starknet.example",
    STARKNET_EXECUTOR_KEYS: `0xabc:0x${"ab".repeat(31)}`,
    AUTH_PROVIDERS: "github,corp-sso",
    AUTH_GITHUB_CLIENT_ID: "github-client",
    AUTH_GITHUB_CLIENT_SECRET: "github-secret",
    AUTH_CORP_SSO_ISSUER: "https://id.example",
    AUTH_CORP_SSO_CLIENT_ID: "corp-client",
    AUTH_CORP_SSO_CLIENT_SECRET: "corp-secret",
    PUBLIC_URL: "https://facilitator.example",
    RATE_LIMIT_PER_KEY: "true",
    CONFIDENTIAL_CONTRACT_ADDRESS: address(1),
    CONFIDENTIAL_ACL_ADDRESS: address(2),
    CONFIDENTIAL_EXECUTOR_ADDRESS: address(3),
    CONFIDENTIAL_KMS_VERIFIER_ADDRESS: address(4),
    CONFIDENTIAL_INPUT_VERIFIER_ADDRESS: address(5),
    CONFIDENTIAL_DECRYPTION_ADDRESS: address(6),
    CONFIDENTIAL_INPUT_VERIFICATION_ADDRESS: address(7),
    CONFIDENTIAL_RELAYER_URL: "https://relayer.example",
    CONFIDENTIAL_RELAYER_API_KEY: "relayer-key",
    CONFIDENTIAL_GATEWAY_CHAIN_ID: "261131",
    CONFIDENTIAL_OPERATOR_KEY: `0x${"11".repeat(32)}`,
  };
}

/** Every variable name the parsers ask `env` for while loading `values`. */
function namesAskedFor(values: Record<string, string>, where: string): Read[] {
  const asked = new Set<string>();
  const env = new Proxy(values, {
    get(target, key) {
      if (typeof key === "string") asked.add(key);
      return Reflect.get(target, key) as unknown;
    },
    has(target, key) {
      if (typeof key === "string") asked.add(key);
      return Reflect.has(target, key);
    },
  });
  loadConfig(env);
  for (const ns of NAMESPACES) FAMILIES[ns].config.present(env);
  return [...asked].filter((n) => VARIABLE_NAME.test(n)).map((pattern) => ({ pattern, where }));
}

test("docs/configuration.md is what `npm run docs:config` writes from the catalogues", async () => {
  const written = readFileSync(CONFIGURATION_DOC, "utf8").split("\n");
  const expected = (await configurationDoc()).split("\n");
  const line = expected.findIndex((text, i) => written[i] !== text);
  const at = line === -1 ? Math.min(written.length, expected.length) : line;
  assert.deepEqual(
    written,
    expected,
    `docs/configuration.md is out of date from line ${at + 1}: run \`npm run docs:config\`\n` +
      `  file:      ${written[at] ?? "(end of file)"}\n  generated: ${expected[at] ?? "(end)"}`,
  );
});

test("the catalogues are well formed: one entry per name, each described", () => {
  const variables = catalogue();
  const names = documentedNames(variables);
  assert.deepEqual(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
    "a name is catalogued twice",
  );
  for (const v of variables) {
    assert.match(v.name, /^[A-Z][A-Z0-9]*(?:_(?:[A-Z0-9]+|<[A-Za-z]+>))*$/, v.name);
    assert.ok(v.description.trim().endsWith("."), `${v.name}: a description is a sentence`);
    if (v.example) assert.match(v.example, /^[A-Z][A-Z0-9_]*=/, `${v.name}: example as NAME=value`);
  }
});

test("the source scan finds each way a variable is read", () => {
  const fixture = [
    'const a = env["PLAIN_READ"];',
    "const p = `AUTH_${id.toUpperCase()}_`;",
    "const b = env[`${p}KIND`];",
    "const c = env[`EVM_THING_${m[1]}`];",
    'const d = readSecret(env, "SOME_KEY");',
    'const e = intVar("SOME_INT", 0, 1, 0);',
    'const f = whole(env, "SOME_WHOLE", 1, 0, 2);',
    "const Schema = z.object({\n  SCHEMA_KEY: z.string(),\n});",
    "const g = /^LOOPED_(\\d+)$/.exec(name);",
  ].join("\n");
  assert.deepEqual(
    readsIn(fixture, "fixture")
      .map((r) => r.pattern)
      .sort(),
    [
      "AUTH_*_KIND",
      "EVM_THING_*",
      "LOOPED_*",
      "PLAIN_READ",
      "SCHEMA_KEY",
      "SOME_INT",
      "SOME_KEY",
      "SOME_KEY_FILE",
      "SOME_WHOLE",
    ],
  );
  assert.deepEqual(
    undocumented(readsIn(fixture, "fixture"), ["PLAIN_READ"]).length,
    8,
    "a read no catalogue names is reported",
  );
});

test("every variable read anywhere in src/ is in a catalogue", () => {
  const reads = sourceFiles(SRC).flatMap((path) =>
    readsIn(readFileSync(path, "utf8"), relative(SRC, path)),
  );
  assert.ok(reads.length > 50, `the scan found only ${reads.length} reads: is it still looking?`);
  assert.deepEqual(
    undocumented(reads, documentedNames(catalogue())),
    [],
    "read in src/ but missing from the catalogues (src/config/*.ts VARIABLES, or the family's config.ts variables): add them, then run `npm run docs:config`",
  );
});

test("every variable the parsers ask for, in production and devnet mode, is in a catalogue, and every catalogued one is asked for", () => {
  const asked = [
    ...namesAskedFor(completeEnvironment(), "a complete production configuration"),
    ...namesAskedFor({}, "devnet mode"),
  ];
  const names = documentedNames(catalogue());
  assert.deepEqual(
    undocumented(asked, names),
    [],
    "asked for by a parser but missing from the catalogues",
  );
  assert.deepEqual(
    names.filter((n) => !asked.some((r) => documents(n, r.pattern))),
    [],
    "catalogued but never asked for by any parser: remove it from the catalogue, or is the configuration above incomplete?",
  );
});
