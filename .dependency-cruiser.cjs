/**
 * The layer arrows of the design, checked on every `npm test`
 * (`npm run arrows`): http -> features -> storage; facilitator -> chains;
 * only the composition root (src/app.ts) wires them together. A chain
 * family is one folder (src/chains/<family>/) that nothing outside
 * src/chains/ names but through the family table (src/chains/index.ts).
 */
const FAMILY = "^src/chains/[^/]+/";
const notTest = "\\.test\\.ts$";

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "No import circle anywhere: each module can be read after the ones it imports.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "families-through-the-table",
      comment:
        "Outside src/chains/, the service reaches a family only through src/chains/index.ts and the ports.",
      severity: "error",
      from: { path: "^src/(?!chains/)" },
      to: { path: FAMILY },
    },
    {
      name: "features-not-to-facilitator",
      comment: "Features declare the engine interface they need (features/payments/engine.ts).",
      severity: "error",
      from: { path: "^src/features", pathNot: notTest },
      to: { path: "^src/facilitator" },
    },
    {
      name: "features-not-to-chain-families",
      comment: "Features may use the family-neutral ports (src/chains/ports.ts), never a family.",
      severity: "error",
      from: { path: "^src/features", pathNot: notTest },
      to: { path: FAMILY },
    },
    {
      name: "features-no-chain-sdk",
      comment:
        "Features reach a chain through the family table and the ports (billing's server scheme: exactServerSchemeOf; confidential settlement: confidentialPort.ts), never through a chain SDK or its cryptography.",
      severity: "error",
      from: { path: "^src/features", pathNot: notTest },
      to: {
        // Every package a family imports but the family-neutral ones (the
        // x402 protocol, the service's libraries): scripts/dependencyRules.test.ts
        // reads the family folders and fails when one is missing here.
        path: "node_modules/(viem|@x402/(evm|svm)|@solana|@solana-program|@near-js|borsh|xrpl|starknet|secp256k1|@zama-fhe)/",
      },
    },
    {
      name: "features-not-to-http",
      comment:
        "Features are what the service does whatever the transport: HTTP calls them, never the reverse (a feature needing something of a request takes it as an argument).",
      severity: "error",
      from: { path: "^src/features" },
      to: { path: "^src/http" },
    },
    {
      name: "http-not-to-chains",
      comment: "HTTP is transport only.",
      severity: "error",
      from: { path: "^src/http" },
      to: { path: "^src/chains" },
    },
    {
      name: "chains-not-up",
      comment:
        "A chain family never imports a feature, HTTP, the facilitator, a worker or storage.",
      severity: "error",
      from: { path: "^src/chains" },
      to: { path: "^src/(features|http|facilitator|workers|storage|app\\.ts|main\\.ts)" },
    },
    {
      name: "families-apart",
      comment: "Chain families do not import each other.",
      severity: "error",
      from: { path: "^src/chains/([^/]+)/" },
      to: { path: "^src/chains/[^/]+/", pathNot: "^src/chains/$1/" },
    },
    {
      name: "workers-not-to-families",
      comment:
        "Workers (reconciler, watchers, webhook delivery) reach a chain as features do, through the family table and the ports, so a new family changes no worker.",
      severity: "error",
      from: { path: "^src/workers" },
      to: { path: FAMILY },
    },
    {
      name: "storage-not-up",
      comment:
        "Storage is the database and Redis for every layer above it and imports none of them, so a migration or a connection never depends on what uses it.",
      severity: "error",
      from: { path: "^src/storage" },
      to: { path: "^src/(features|http|facilitator|chains|workers|app\\.ts)" },
    },
    {
      name: "clients-stand-alone",
      comment:
        "A family's clients/ is what resource servers and their customers import: its own network data and the shared server scheme, nothing of the service.",
      severity: "error",
      from: { path: "^src/chains/([^/]+)/clients/" },
      to: {
        path: "^src/",
        pathNot: "^src/chains/($1/(clients/|networks\\.ts$)|exactServerScheme\\.ts$)",
      },
    },
    {
      name: "offers-stand-alone",
      comment: "src/clients is for resource servers: nothing of the service.",
      severity: "error",
      from: { path: "^src/clients" },
      to: { path: "^src/(?!clients/)" },
    },
    {
      name: "config-not-up",
      comment:
        "src/config reads the environment for everyone above it: it may use the family table, the protocol and lib, never a feature, storage, HTTP, the facilitator or a worker (a feature's defaults are applied by the feature).",
      severity: "error",
      from: { path: "^src/config" },
      to: { path: "^src/(features|storage|http|facilitator|workers|cli|app\\.ts|main\\.ts)" },
    },
    {
      name: "protocol-is-low",
      comment:
        "src/protocol is x402 itself (envelope, reasons, answers, pre-checks): every layer may use it; it uses only lib.",
      severity: "error",
      from: { path: "^src/protocol" },
      to: { path: "^src/(?!protocol/|lib/)" },
    },
    {
      name: "lib-is-a-leaf",
      comment:
        "src/lib (logging, metrics, errors, environment parsing) is used by every layer and imports nothing of the service, so any file may use it without an import circle.",
      severity: "error",
      from: { path: "^src/lib" },
      to: { path: "^src/(?!lib/)" },
    },
    {
      name: "only-the-root-wires",
      comment: "src/app.ts is the composition root; in src only main.ts uses it.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/main\\.ts$" },
      to: { path: "^src/app\\.ts$" },
    },
    {
      name: "no-devnet-in-production",
      comment:
        "No production file imports the devnet; the entry point loads it in devnet mode only, dynamically.",
      severity: "error",
      from: { path: "^src/", pathNot: `${notTest}|^src/main\\.ts$` },
      to: { path: "^devnet/" },
    },
    {
      name: "devnet-only-in-devnet-mode",
      comment:
        "The entry point loads the devnet (compiler, anvil) only in devnet mode, dynamically.",
      severity: "error",
      from: { path: "^src/main\\.ts$" },
      to: { path: "^devnet/", dependencyTypesNot: ["dynamic-import", "type-only"] },
    },
    {
      name: "production-needs-no-dev-dependency",
      comment:
        "The service runs from `npm ci --omit=dev`: nothing it loads outside devnet mode may be a devDependency.",
      severity: "error",
      from: { path: "^src/", pathNot: notTest },
      to: { dependencyTypes: ["npm-dev"], dependencyTypesNot: ["type-only", "dynamic-import"] },
    },
    {
      name: "no-unlisted-packages",
      comment: "Every package the service imports is declared in package.json.",
      severity: "error",
      from: { path: "^src/", pathNot: notTest },
      to: { dependencyTypes: ["npm-no-pkg", "npm-unknown"] },
    },
    {
      name: "chaos-through-the-tables",
      comment:
        "The chaos run reaches the families through the devnet's table and descriptors (devnet/families.ts) and the suites' adapters (test/families/index.ts), never one family's folder or adapter, so a new family needs nothing in chaos/.",
      severity: "error",
      from: { path: "^chaos/" },
      to: {
        path: "^(devnet|test/families)/",
        pathNot: "^(devnet/(families|family)|test/families/(index|adapter|signing))\\.ts$",
      },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^dist/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js", ".json"] },
  },
};
