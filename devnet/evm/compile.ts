/**
 * Compiles the devnet contracts: every `.sol` file in `devnet/contracts/`, in
 * one solc standard-JSON run, with the `solc` npm package (no native solc or
 * Foundry needed).
 *
 * Tests start a devnet many times, and loading plus running solc costs
 * seconds, so the output is cached in `.devnet/artifacts/<sha256>.json`. The
 * key covers everything that can change the bytecode: the source files, the
 * compiler version, the compiler settings and the versions of the Solidity
 * libraries that imports resolve to (OpenZeppelin, its confidential
 * contracts, and Zama's fhEVM library for the confidential settlement vault). A cache file is written to a temp name and renamed, so
 * parallel test processes never read half of one.
 *
 * Adding a contract is adding a file: it is compiled by the same step and
 * shows up in `loadArtifacts()` under its contract name.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readFile, readdir, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { Abi, Hex } from "viem";
import { siblingEntry } from "../../src/lib/siblingEntry.js";

interface Artifact {
  abi: Abi;
  /** Creation code (constructor included). */
  bytecode: Hex;
  /** Runtime code: what `anvil_setCode` places at an address. */
  deployedBytecode: Hex;
}

export type Artifacts = Record<string, Artifact>;

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
// The sources sit beside this module: devnet/evm/contracts, or dist/devnet/evm/contracts
// in the compiled service (the build copies them).
const CONTRACTS_DIR = join(HERE, "contracts");

/**
 * The nearest directory above `dir` that holds a package.json: the project
 * root, both for devnet/evm/ and for the compiled dist/devnet/evm/ (dist/ has no
 * package.json).
 */
export function projectRootFrom(dir: string): string {
  for (let d = resolve(dir); ; d = dirname(d)) {
    if (existsSync(join(d, "package.json"))) return d;
    if (dirname(d) === d) return resolve(dir, "..");
  }
}

// At the project root, not beside this module: every build recreates dist/,
// and a cache inside it would have the first start after each build compile
// again (seconds, and solc's memory held by the service for good).
export const CACHE_DIR = join(projectRootFrom(HERE), ".devnet", "artifacts");

/** Part of the cache key: changing a setting must not serve stale bytecode. */
const SETTINGS = {
  optimizer: { enabled: true, runs: 200 },
  // Anvil's default hardfork is newer; cancun is what every served chain runs.
  evmVersion: "cancun",
  outputSelection: {
    "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] },
  },
} as const;

/** The slice of the untyped `solc` module this file uses. */
interface Solc {
  compile(input: string, callbacks: { import(path: string): ImportResult }): string;
}
type ImportResult = { contents: string } | { error: string };

interface SolcOutput {
  errors?: { severity: "error" | "warning" | "info"; formattedMessage: string }[];
  contracts?: Record<
    string,
    Record<
      string,
      { abi: Abi; evm: { bytecode: { object: string }; deployedBytecode: { object: string } } }
    >
  >;
}

let loading: Promise<Artifacts> | undefined;

/**
 * Every deployable contract in `devnet/contracts/`, by contract name.
 * Compiles only when the cache has no entry for the current sources; within
 * one process the result is shared by every caller.
 */
export function loadArtifacts(): Promise<Artifacts> {
  loading ??= compileOrLoad().catch((e: unknown) => {
    // A failed compile (say, a syntax error being fixed) must not stick.
    loading = undefined;
    throw e;
  });
  return loading;
}

async function compileOrLoad(): Promise<Artifacts> {
  const sources = await readSources();
  const cacheFile = join(CACHE_DIR, `${cacheKey(sources)}.json`);
  const cached = await readCache(cacheFile);
  if (cached) return cached;
  await compileInChild();
  const compiled = await readCache(cacheFile);
  if (!compiled) throw new Error(`the devnet contract compiler wrote no ${cacheFile}`);
  return compiled;
}

/**
 * Compiles the current sources into the cache, in this process. Run by
 * compileChild.ts, in a process of its own.
 */
export async function compileToCache(): Promise<void> {
  const sources = await readSources();
  const cacheFile = join(CACHE_DIR, `${cacheKey(sources)}.json`);
  process.stderr.write("compiling devnet contracts…\n");
  const artifacts = compile(sources);
  await mkdir(CACHE_DIR, { recursive: true });
  const tmp = `${cacheFile}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, JSON.stringify(artifacts));
  await rename(tmp, cacheFile);
}

/**
 * solc is WebAssembly, and its memory (some 200 MB for these contracts) stays
 * with a process until it exits: compiled in the service's own process, it
 * would be held for as long as the service runs. A short-lived child keeps
 * it out.
 */
async function compileInChild(): Promise<void> {
  const entry = siblingEntry(import.meta.url, "compileChild");
  const args =
    "file" in entry ? [fileURLToPath(entry.file)] : ["--input-type=module", "-e", entry.script];
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>(
    (done, fail) => {
      const proc = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "pipe"] });
      let text = "";
      proc.stderr.setEncoding("utf8");
      proc.stderr.on("data", (chunk: string) => (text += chunk));
      proc.once("error", fail);
      proc.once("close", (exitCode) => done({ code: exitCode, stderr: text }));
    },
  );
  if (code !== 0) throw new Error(stderr.trim() || `the devnet contract compiler exited ${code}`);
  // "compiling devnet contracts…" and any warning in this project's own contracts.
  process.stderr.write(stderr);
}

async function readSources(): Promise<Record<string, { content: string }>> {
  const files = (await readdir(CONTRACTS_DIR)).filter((f) => f.endsWith(".sol")).sort();
  if (files.length === 0) throw new Error(`no .sol files in ${CONTRACTS_DIR}`);
  const sources: Record<string, { content: string }> = {};
  for (const f of files) sources[f] = { content: await readFile(join(CONTRACTS_DIR, f), "utf8") };
  return sources;
}

function packageVersion(pkg: string): string {
  const path = require.resolve(`${pkg}/package.json`);
  return (JSON.parse(readFileSync(path, "utf8")) as { version: string }).version;
}

/** The packages devnet contracts may import from, by import prefix. */
const LIBRARIES = [
  "@openzeppelin/contracts",
  "@openzeppelin/confidential-contracts",
  "@fhevm/solidity",
  // The encrypted types @fhevm/solidity is written against.
  "encrypted-types",
] as const;

function cacheKey(sources: Record<string, { content: string }>): string {
  // The solc npm package version is the compiler version, and reading it here
  // avoids loading the 8 MB compiler just to learn that nothing needs compiling.
  return createHash("sha256")
    .update(
      JSON.stringify({
        solc: packageVersion("solc"),
        libraries: LIBRARIES.map((pkg) => `${pkg}@${packageVersion(pkg)}`),
        settings: SETTINGS,
        sources,
      }),
    )
    .digest("hex");
}

async function readCache(file: string): Promise<Artifacts | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed = JSON.parse(text) as Artifacts;
    const complete = Object.values(parsed).every(
      (a) => Array.isArray(a.abi) && a.deployedBytecode.startsWith("0x"),
    );
    return complete ? parsed : undefined;
  } catch {
    return undefined; // a corrupt cache entry is simply rebuilt
  }
}

/**
 * solc asks for every import by its source unit name, e.g.
 * `@openzeppelin/contracts/utils/cryptography/ECDSA.sol` (relative imports
 * inside a package are already made absolute by solc). Those are looked up in
 * the node_modules folders Node itself would search, never outside them.
 */
function findImport(path: string): ImportResult {
  if (!LIBRARIES.some((pkg) => path.startsWith(`${pkg}/`))) {
    return { error: `devnet contracts may import only ${LIBRARIES.join(", ")}, not ${path}` };
  }
  for (const dir of require.resolve.paths(path) ?? []) {
    const full = normalize(join(dir, path));
    if (!full.startsWith(dir + sep)) return { error: `import escapes node_modules: ${path}` };
    if (existsSync(full)) return { contents: readFileSync(full, "utf8") };
  }
  return { error: `not found in node_modules: ${path}` };
}

function compile(sources: Record<string, { content: string }>): Artifacts {
  const solc = require("solc") as Solc;
  const input = { language: "Solidity", sources, settings: SETTINGS };
  const output = JSON.parse(
    solc.compile(JSON.stringify(input), { import: findImport }),
  ) as SolcOutput;

  const problems = output.errors ?? [];
  const errors = problems.filter((e) => e.severity === "error");
  if (errors.length > 0) {
    throw new Error(
      `devnet contracts do not compile:\n${errors.map((e) => e.formattedMessage).join("\n")}`,
    );
  }
  // Warnings about library code (OpenZeppelin's transient-storage notice)
  // are not ours to fix and would only alarm whoever runs `npm start`; a
  // warning in this project's own contracts is shown to whoever wrote it.
  for (const w of problems.filter((e) => e.severity === "warning")) {
    if (/^\s*--> @(openzeppelin|fhevm)\//m.test(w.formattedMessage)) continue;
    process.stderr.write(w.formattedMessage + "\n");
  }

  const artifacts: Artifacts = {};
  for (const file of Object.keys(sources)) {
    for (const [name, c] of Object.entries(output.contracts?.[file] ?? {})) {
      // Interfaces and abstract contracts have no code to place anywhere.
      if (c.evm.deployedBytecode.object === "") continue;
      if (artifacts[name]) throw new Error(`two devnet contracts are named ${name}`);
      artifacts[name] = {
        abi: c.abi,
        bytecode: `0x${c.evm.bytecode.object}`,
        deployedBytecode: `0x${c.evm.deployedBytecode.object}`,
      };
    }
  }
  return artifacts;
}
