/**
 * Which kind of work a profiled frame is, from its script URL (the package it
 * belongs to): the categories a benchmark report sums self time into. They
 * are the ones the facilitator profiles show: the embedded database
 * (@electric-sql/pglite, with its WebAssembly and file writes), keccak
 * (@noble/hashes), secp256k1 (the native addon, @noble/curves), JSON, the
 * HTTP server, the RPC client, the rest of viem, GC, own code (this service's
 * dist/src, the reference's dist/bench/reference).
 *
 * Node's own functions (sockets, streams, fs, URL parsing, timers) and
 * native or WebAssembly frames are not a kind of work by themselves: they
 * count for the nearest caller that is (a socket write under fastify is HTTP
 * server time, under undici RPC time; PGlite's WebAssembly and its file
 * writes are database time). With no such caller they are "Node.js runtime".
 */
import type { CallFrame, FrameTime } from "./cpuProfile.js";

const CATEGORY = {
  database: "embedded database (PGlite)",
  databaseClient: "SQL building and driver (kysely, pg)",
  hashing: "hashing (keccak, node:crypto)",
  signatures: "signatures (secp256k1, ed25519, Stark curve)",
  json: "JSON",
  httpServer: "HTTP server (fastify / express, node:http)",
  rpcClient: "RPC client (viem transport, undici)",
  viem: "viem other (ABI, encoding, actions)",
  x402: "x402 schemes (@x402/*)",
  validation: "validation (zod, ajv)",
  logging: "logging and metrics (pino, prom-client)",
  ownCode: "own code",
  otherPackages: "other packages",
  gc: "garbage collection",
  program: "V8 and native, outside JavaScript",
  modules: "module loading",
  node: "Node.js runtime (event loop, promises, streams)",
} as const;
export type Category = (typeof CATEGORY)[keyof typeof CATEGORY];

const inPackages = (names: readonly string[]) =>
  new RegExp(`node_modules/(?:${names.map((n) => n.replace(/[.]/g, "\\.")).join("|")})/`);

/** First match wins: the specific rules come before the package families they sit in. */
const RULES: readonly (readonly [Category, RegExp])[] = [
  // Loading a package is not that package's work, whoever asked for it.
  [CATEGORY.modules, /^node:internal\/(modules|bootstrap|deps\/cjs-module-lexer|source_map)\//],
  [CATEGORY.database, inPackages(["@electric-sql/pglite"])],
  [
    CATEGORY.databaseClient,
    inPackages(["kysely", "pg", "pg-protocol", "pg-pool", "pg-types", "postgres-[^/]+"]),
  ],
  [
    CATEGORY.signatures,
    inPackages([
      "secp256k1",
      "@noble/curves",
      "@noble/secp256k1",
      "@noble/ed25519",
      "elliptic",
      // The families' own curves, hashes and keys.
      "@scure/starknet",
      "ripple-keypairs",
      "@near-js/crypto",
      "tweetnacl",
    ]),
  ],
  [CATEGORY.signatures, /node_modules\/viem\/_esm\/utils\/signature\//],
  [CATEGORY.hashing, inPackages(["@noble/hashes", "js-sha3", "keccak"])],
  [CATEGORY.hashing, /node_modules\/viem\/_esm\/utils\/hash\/|^node:internal\/crypto\//],
  [
    CATEGORY.json,
    inPackages([
      "secure-json-parse",
      "fast-json-stringify",
      "safe-stable-stringify",
      "json-stringify-safe",
    ]),
  ],
  [
    CATEGORY.rpcClient,
    /^node:internal\/deps\/undici\/|node_modules\/undici\/|node_modules\/viem\/_esm\/(utils\/rpc|clients\/transports)\//,
  ],
  [CATEGORY.httpServer, /^node:_http_(server|incoming|outgoing|common)$/],
  [
    CATEGORY.httpServer,
    inPackages([
      "fastify",
      "@fastify/[^/]+",
      "find-my-way",
      "avvio",
      "light-my-request",
      "fast-querystring",
      "fast-content-type-parse",
      "toad-cache",
      "express",
      "router",
      "body-parser",
      "raw-body",
      "iconv-lite",
      "type-is",
      "content-type",
      "on-finished",
      "finalhandler",
      "send",
      "qs",
      "path-to-regexp",
      "proxy-addr",
      "mime-types",
      "http-errors",
      "statuses",
      "etag",
      "fresh",
      "accepts",
      "negotiator",
    ]),
  ],
  [CATEGORY.validation, inPackages(["zod", "ajv", "ajv-formats", "fast-uri"])],
  [CATEGORY.viem, inPackages(["viem", "ox", "abitype"])],
  [CATEGORY.x402, inPackages(["@x402/[^/]+"])],
  [
    CATEGORY.logging,
    inPackages(["pino", "pino-std-serializers", "@pinojs/[^/]+", "sonic-boom", "prom-client"]),
  ],
  [CATEGORY.otherPackages, /node_modules\//],
  [CATEGORY.ownCode, /\/dist\/(src|bench)\//],
];

/** A frame's own category, or undefined when it counts for its caller. */
function ownCategory(frame: CallFrame, callers: readonly CallFrame[]): Category | undefined {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === "(garbage collector)") return CATEGORY.gc;
    if (functionName === "(program)") return CATEGORY.program;
    if (functionName.startsWith("(")) return CATEGORY.node;
    // V8's JSON builtins have no script; the only other native `parse` in
    // these profiles is node:url's, told apart by its caller.
    if (functionName === "stringify") return CATEGORY.json;
    if (
      functionName === "parse" &&
      !callers.find((c) => c.url)?.url.startsWith("node:internal/url")
    )
      return CATEGORY.json;
    return undefined;
  }
  const rule = RULES.find(([, test]) => test.test(url));
  if (rule) return rule[0];
  return url.startsWith("node:") || url.startsWith("wasm:") ? undefined : CATEGORY.ownCode;
}

export function categoryOf(t: Pick<FrameTime, "frame" | "callers">): Category {
  const own = ownCategory(t.frame, t.callers);
  if (own) return own;
  for (let i = 0; i < t.callers.length; i++) {
    const c = ownCategory(t.callers[i]!, t.callers.slice(i + 1));
    // A caller that is itself runtime bookkeeping (the microtask loop, say)
    // says nothing about whose work this is.
    if (c && c !== CATEGORY.node) return c;
  }
  return CATEGORY.node;
}

/** Which package (or "node", "own code", "(gc)") a frame belongs to. */
export function packageOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith("node:")) return "node";
  if (url.startsWith("wasm:")) return "(WebAssembly)";
  return "own code";
}

/** `keccakP @noble/hashes/esm/sha3.js:49`: a function and where it is, short. */
export function functionLabel(frame: CallFrame): string {
  const name = frame.functionName || "(anonymous)";
  // (garbage collector), (program): V8's own entries, no code of anyone's.
  if (!frame.url && name.startsWith("(")) return name;
  const where = frame.url
    ? `${frame.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*\/dist\//, "")}:${frame.lineNumber + 1}`
    : "(native)";
  return `${name} ${where}`;
}
