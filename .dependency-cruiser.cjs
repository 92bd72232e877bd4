/**
 * The layer arrows of the design, checked on every `npm test`
 * (`npm run arrows`): http -> features -> storage; facilitator -> chains ->
 * networks; only the composition root (src/app.ts) wires them together.
 * A chain family is one folder that nothing but the composition root names.
 */
const FAMILY = "^src/chains/[^/]+/";
const notTest = "\\.test\\.ts$";

module.exports = {
  forbidden: [
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
      name: "features-not-to-http",
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
      severity: "error",
      from: { path: "^src/workers" },
      to: { path: FAMILY },
    },
    {
      name: "storage-not-up",
      severity: "error",
      from: { path: "^src/storage" },
      to: { path: "^src/(features|http|facilitator|chains|workers|app\\.ts)" },
    },
    {
      name: "clients-stand-alone",
      comment:
        "src/clients is what resource servers and their customers import: it needs the network registry and nothing of the service.",
      severity: "error",
      from: { path: "^src/clients" },
      to: { path: "^src/(?!clients/|networks/)" },
    },
    {
      name: "lib-is-a-leaf",
      severity: "error",
      from: { path: "^src/lib" },
      to: { path: "^src/(?!lib/)" },
    },
    {
      name: "only-the-root-wires",
      comment:
        "src/app.ts is the composition root; in src only main.ts and the devnet bootstrap use it.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(main|devnetMode|banner)\\.ts$" },
      to: { path: "^src/app\\.ts$" },
    },
    {
      name: "devnet-only-in-devnet-mode",
      comment: "The service loads the devnet (compiler, anvil) only in devnet mode, dynamically.",
      severity: "error",
      from: { path: "^src/", pathNot: notTest },
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
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "node_modules|^dist/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js", ".json"] },
  },
};
