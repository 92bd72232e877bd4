import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig } from "./index.js";

const KEY = "0x" + "ab".repeat(32);

test("no chain configuration means devnet mode with sane defaults", () => {
  const c = loadConfig({});
  assert.equal(c.mode, "devnet");
  assert.equal(c.port, 4020);
  assert.equal(c.host, "127.0.0.1");
  assert.equal(c.bodyLimitBytes, 65536);
  assert.ok(c.settleTimeoutMs < 90_000, "below the official client's 90 s timeout");
  // Every network production can serve, so a fresh start lists what production lists.
  assert.equal(c.devnet.networks.length, 15);
  assert.ok(c.devnet.networks.includes("eip155:4663"));
  assert.ok(c.devnet.networks.includes("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"));
  assert.ok(c.devnet.networks.includes("xrpl:0"));
  assert.ok(c.devnet.networks.includes("near:mainnet"));
  assert.deepEqual(loadConfig({ DEVNET_NETWORKS: "eip155:8453" }).devnet.networks, ["eip155:8453"]);
  assert.equal(c.devnet.blockTimeSeconds, 1);
});

test("RPC URLs and keys switch to production mode", () => {
  const c = loadConfig({
    EVM_RPC_URLS_8453: "https://a.example, https://b.example",
    EVM_PRIVATE_KEYS: `${KEY},${KEY.replace("ab", "cd")}`,
  });
  assert.equal(c.mode, "production");
  assert.equal(c.host, "0.0.0.0");
  assert.deepEqual(c.chains.eip155!.networks, [
    {
      id: "eip155:8453",
      rpcUrls: ["https://a.example", "https://b.example"],
      maxGasPriceWei: undefined,
    },
  ]);
  assert.equal(c.chains.eip155!.privateKeys.length, 2);
});

test("production config never falls back to devnet: a missing piece is an error naming it", () => {
  assert.throws(() => loadConfig({ EVM_RPC_URLS_8453: "https://a.example" }), /EVM_PRIVATE_KEYS/);
  assert.throws(() => loadConfig({ EVM_PRIVATE_KEYS: KEY }), /EVM_RPC_URLS_/);
  assert.throws(
    () => loadConfig({ FACILITATOR_MODE: "devnet", EVM_PRIVATE_KEYS: KEY }),
    ConfigError,
  );
});

test("keys can come from a file, and a bad key is reported by position, never echoed", () => {
  const dir = mkdtempSync(join(tmpdir(), "cfg-"));
  const file = join(dir, "keys");
  writeFileSync(file, `# signer keys\n${KEY}\n`);
  const c = loadConfig({ EVM_RPC_URLS_8453: "https://a.example", EVM_PRIVATE_KEYS_FILE: file });
  assert.deepEqual(c.chains.eip155!.privateKeys, [KEY]);
  const secret = "0xdeadbeef";
  try {
    loadConfig({ EVM_RPC_URLS_8453: "https://a.example", EVM_PRIVATE_KEYS: `${KEY},${secret}` });
    assert.fail("should throw");
  } catch (e) {
    assert.match((e as Error).message, /entry #2/);
    assert.doesNotMatch((e as Error).message, /deadbeef/);
  }
});

test("invalid values name the variable", () => {
  assert.throws(() => loadConfig({ PORT: "eighty" }), /PORT/);
  assert.throws(
    () => loadConfig({ EVM_RPC_URLS_1: "https://x", EVM_PRIVATE_KEYS: KEY }),
    /chain 1 is not a supported network/,
  );
  assert.throws(() => loadConfig({ DEVNET_NETWORKS: "eip155:999" }), /DEVNET_NETWORKS/);
  assert.throws(() => loadConfig({ DATABASE_URL: "mysql://x" }), /DATABASE_URL/);
  assert.throws(() => loadConfig({ SETTLE_TIMEOUT_MS: "120000" }), /SETTLE_TIMEOUT_MS/);
});

test("rate limits: per API key by plan in production, per IP everywhere; the devnet limits keys only when asked", () => {
  const production = { EVM_RPC_URLS_8453: "https://a.example", EVM_PRIVATE_KEYS: KEY };
  const p = loadConfig(production).http;
  assert.equal(p.rateLimitMax, 10_000, "per IP");
  assert.equal(p.rateLimitWindowMs, 10_000);
  assert.deepEqual(p.keyRateLimits, {
    windowMs: 60_000,
    perPlan: { free: 120, starter: 1_200, pro: 6_000, max: 60_000, payg: 6_000 },
  });
  const { free, starter, pro, max } = p.keyRateLimits!.perPlan;
  assert.ok(
    free < starter && starter < pro && pro < max,
    "each plan allows more than the one below",
  );

  assert.equal(loadConfig({}).http.keyRateLimits, undefined, "devnet default: keys unlimited");
  assert.equal(loadConfig({}).http.rateLimitMax, 10_000, "the devnet still limits per IP");
  const devnet = loadConfig({
    RATE_LIMIT_PER_KEY: "true",
    RATE_LIMIT_PLAN_WINDOW_MS: "1000",
    RATE_LIMIT_PLAN_FREE: "3",
    RATE_LIMIT_PLAN_PAYG: "0",
  }).http.keyRateLimits;
  assert.deepEqual(devnet, {
    windowMs: 1000,
    perPlan: { free: 3, starter: 1_200, pro: 6_000, max: 60_000, payg: 0 },
  });
  assert.equal(
    loadConfig({ ...production, RATE_LIMIT_PER_KEY: "false" }).http.keyRateLimits,
    undefined,
  );
});

test("rate-limit settings that cannot work are refused with the variable named", () => {
  assert.throws(
    () => loadConfig({ RATE_LIMIT_PER_KEY: "true", RATE_LIMIT_PLAN_FREE: "-1" }),
    /RATE_LIMIT_PLAN_FREE must be a whole number from 0/,
  );
  assert.throws(
    () => loadConfig({ RATE_LIMIT_PER_KEY: "true", RATE_LIMIT_PLAN_MAX: "lots" }),
    /RATE_LIMIT_PLAN_MAX/,
  );
  assert.throws(
    () => loadConfig({ RATE_LIMIT_PER_KEY: "true", RATE_LIMIT_PLAN_WINDOW_MS: "10" }),
    /RATE_LIMIT_PLAN_WINDOW_MS must be a whole number from 1000/,
  );
  assert.throws(() => loadConfig({ RATE_LIMIT_PER_KEY: "yes" }), /RATE_LIMIT_PER_KEY/);
  // A plan limit that would silently do nothing is an error that says what to set.
  assert.throws(
    () => loadConfig({ RATE_LIMIT_PLAN_FREE: "30" }),
    /RATE_LIMIT_PLAN_FREE has no effect while per-key rate limits are off \(the devnet default\): set RATE_LIMIT_PER_KEY=true/,
  );
  assert.throws(
    () =>
      loadConfig({
        EVM_RPC_URLS_8453: "https://a.example",
        EVM_PRIVATE_KEYS: KEY,
        RATE_LIMIT_PER_KEY: "false",
        RATE_LIMIT_PLAN_PRO: "10",
        RATE_LIMIT_PLAN_MAX: "20",
      }),
    /RATE_LIMIT_PLAN_PRO, RATE_LIMIT_PLAN_MAX have no effect .*RATE_LIMIT_PER_KEY=false/,
  );
});

test("DEVNET_NETWORKS=all lists every network, the Permit2 (USDG) one and Solana included", () => {
  const c = loadConfig({ DEVNET_NETWORKS: "all" });
  assert.equal(c.devnet.networks.length, 15);
  assert.ok(c.devnet.networks.includes("xrpl:0"));
  assert.ok(c.devnet.networks.includes("near:mainnet"));
  assert.ok(c.devnet.networks.includes("eip155:4663"));
  assert.ok(c.devnet.networks.includes("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"));
});

const SVM_KEY = "5".repeat(87);

test("Solana alone is a production configuration: RPC and fee-payer keys, with safe caps", () => {
  const c = loadConfig({ SVM_RPC_URL: "https://sol.example/key123", SVM_PRIVATE_KEYS: SVM_KEY });
  assert.equal(c.mode, "production");
  assert.deepEqual(c.chains.solana, {
    networks: [
      { id: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp", rpcUrl: "https://sol.example/key123" },
    ],
    secretKeys: [SVM_KEY],
  });
  assert.equal(c.chains.eip155, undefined);
  assert.equal(c.families.solana.commitment, "confirmed");
  assert.ok(
    c.families.solana.maxPriorityFeeMicroLamports < 5_000_000,
    "below the scheme's own cap",
  );
});

test("half a Solana configuration is refused with what to set", () => {
  assert.throws(() => loadConfig({ SVM_RPC_URL: "https://sol.example" }), /SVM_PRIVATE_KEYS/);
  assert.throws(() => loadConfig({ SVM_PRIVATE_KEYS: SVM_KEY }), /SVM_RPC_URL/);
  assert.throws(
    () => loadConfig({ SVM_RPC_URL: "https://s.example", SVM_PRIVATE_KEYS: "0xnothex" }),
    /base58 64-byte/,
  );
  assert.throws(
    () =>
      loadConfig({
        SVM_RPC_URL: "https://s.example",
        SVM_PRIVATE_KEYS: SVM_KEY,
        SVM_COMMITMENT: "processed",
      }),
    /SVM_COMMITMENT/,
  );
});

test("a per-network gas price ceiling is read in gwei", () => {
  const c = loadConfig({
    EVM_RPC_URLS_8453: "https://a.example",
    EVM_PRIVATE_KEYS: KEY,
    EVM_MAX_GAS_PRICE_GWEI_8453: "0.5",
  });
  assert.equal(c.chains.eip155!.networks[0]!.maxGasPriceWei, 500_000_000n);
  assert.throws(
    () =>
      loadConfig({
        EVM_RPC_URLS_8453: "https://a.example",
        EVM_PRIVATE_KEYS: KEY,
        EVM_MAX_GAS_PRICE_GWEI_8453: "cheap",
      }),
    /EVM_MAX_GAS_PRICE_GWEI_8453/,
  );
});

test("a per-network block time overrides the registry's, in whole milliseconds", () => {
  const base = { EVM_RPC_URLS_8453: "https://a.example", EVM_PRIVATE_KEYS: KEY };
  assert.equal(loadConfig(base).chains.eip155!.networks[0]!.blockTimeMs, undefined);
  const c = loadConfig({ ...base, EVM_BLOCK_TIME_MS_8453: "1000" });
  assert.equal(c.chains.eip155!.networks[0]!.blockTimeMs, 1000);
  for (const bad of ["fast", "0", "49", "1.5", "600001"]) {
    assert.throws(
      () => loadConfig({ ...base, EVM_BLOCK_TIME_MS_8453: bad }),
      (e: Error) => e.message.includes("EVM_BLOCK_TIME_MS_8453") && e.message.includes(bad),
      bad,
    );
  }
});

test("the XRP Ledger alone is a production configuration: one JSON-RPC URL, no keys", () => {
  const c = loadConfig({ XRPL_RPC_URL: "https://xrpl.example/rpc" });
  assert.equal(c.mode, "production");
  assert.deepEqual(c.chains.xrpl, {
    networks: [{ id: "xrpl:0", rpcUrl: "https://xrpl.example/rpc" }],
  });
  assert.equal(c.families.xrpl.maxFeeDrops, 10_000n);
  assert.equal(c.families.xrpl.minLedgerCloseSeconds, 3);
  assert.throws(() => loadConfig({ XRPL_RPC_URL: "wss://xrpl.example" }), /JSON-RPC over http/);
  assert.throws(
    () => loadConfig({ XRPL_RPC_URL: "https://x.example", XRPL_MAX_FEE_DROPS: "5" }),
    /XRPL_MAX_FEE_DROPS/,
  );
});

test("NEAR is a production configuration: an RPC URL and relayer keys, both or neither", () => {
  const relayer = `relayer.near:ed25519:${"3".repeat(87)}`;
  const c = loadConfig({ NEAR_RPC_URL: "https://near.example", NEAR_RELAYER_KEYS: relayer });
  assert.equal(c.mode, "production");
  assert.deepEqual(c.chains.near, {
    networks: [{ id: "near:mainnet", rpcUrl: "https://near.example" }],
    relayerKeys: [relayer],
  });
  assert.equal(c.families.near.minRelayerBalanceYocto, 10n ** 24n);
  assert.equal(c.families.near.maxGas, 100n * 10n ** 12n);
  assert.equal(c.families.near.minBlockSeconds, 1);
  assert.throws(() => loadConfig({ NEAR_RPC_URL: "https://near.example" }), /no relayer keys/);
  assert.throws(() => loadConfig({ NEAR_RELAYER_KEYS: relayer }), /NEAR_RPC_URL/);
  assert.throws(
    () => loadConfig({ NEAR_RPC_URL: "https://near.example", NEAR_RELAYER_KEYS: "relayer.near" }),
    /account_id:ed25519/,
  );
  assert.throws(
    () =>
      loadConfig({
        NEAR_RPC_URL: "https://near.example",
        NEAR_RELAYER_KEYS: relayer,
        NEAR_MIN_RELAYER_BALANCE: "lots",
      }),
    /NEAR_MIN_RELAYER_BALANCE/,
  );
});

test("Starknet is a production configuration: one JSON-RPC URL and executor address:key pairs, never echoed", () => {
  const key = `0x${"ab".repeat(31)}`;
  const c = loadConfig({
    STARKNET_RPC_URL: "https://starknet.example/rpc",
    STARKNET_EXECUTOR_KEYS: `0xABC:${key} # first\n0xdef:${key}`,
  });
  assert.equal(c.mode, "production");
  assert.deepEqual(c.chains.starknet, {
    networks: [{ id: "starknet:SN_MAIN", rpcUrl: "https://starknet.example/rpc" }],
    executors: [
      { address: "0xabc", privateKey: key },
      { address: "0xdef", privateKey: key },
    ],
  });
  assert.equal(c.families.starknet.minExecutorFeeBalance, 5n * 10n ** 18n);
  assert.equal(c.families.starknet.timeSkewSeconds, 30);
  assert.throws(
    () => loadConfig({ STARKNET_RPC_URL: "https://s.example" }),
    /STARKNET_EXECUTOR_KEYS_FILE/,
  );
  assert.throws(
    () => loadConfig({ STARKNET_RPC_URL: "https://s.example", STARKNET_EXECUTOR_KEYS: key }),
    (e: Error) => /entry #1/.test(e.message) && !e.message.includes(key),
  );
  assert.throws(
    () =>
      loadConfig({
        STARKNET_RPC_URL: "https://s.example",
        STARKNET_EXECUTOR_KEYS: `0x1:${key}`,
        STARKNET_MIN_EXECUTOR_STRK: "lots",
      }),
    /STARKNET_MIN_EXECUTOR_STRK/,
  );
});

test("plans are priced in USD and sold on USDC networks: defaults, the operator's prices, and what cannot work", () => {
  const devnet = loadConfig({});
  assert.deepEqual(
    devnet.plans.prices,
    {},
    "unset prices stay unset: the plans feature owns its defaults",
  );
  assert.deepEqual(
    devnet.billing.networks,
    ["eip155:8453"],
    "the devnet sells on its first EVM network",
  );
  assert.equal(devnet.billing.payTo, "0x0000000000000000000000000000000000b111ed");
  assert.equal(devnet.billing.topUpMinMicroUsd, 1_000_000);
  assert.equal(devnet.plans.paygGraceMicroUsd, 0);
  const priced = loadConfig({
    PLAN_PRO_PRICE_USD: "19.5",
    BILLING_PAYG_GRACE_USD: "0.25",
    BILLING_NETWORKS: "",
  });
  assert.equal(priced.plans.prices.pro, 19_500_000);
  assert.equal(priced.plans.paygGraceMicroUsd, 250_000);
  assert.deepEqual(priced.billing.networks, [], "empty: nothing is sold");
  const production = {
    EVM_RPC_URLS_8453: "https://a.example",
    EVM_PRIVATE_KEYS: KEY,
  };
  assert.deepEqual(loadConfig(production).billing.networks, [], "production sells only when told");
  assert.deepEqual(
    loadConfig({
      ...production,
      BILLING_NETWORKS: "eip155:8453",
      BILLING_PAY_TO: `0x${"7e".repeat(20)}`,
    }).billing,
    { networks: ["eip155:8453"], payTo: `0x${"7e".repeat(20)}`, topUpMinMicroUsd: 1_000_000 },
  );
  for (const [env, message] of [
    [{ ...production, BILLING_NETWORKS: "eip155:8453" }, /BILLING_PAY_TO/],
    [
      { ...production, BILLING_NETWORKS: "eip155:4663", BILLING_PAY_TO: `0x${"7e".repeat(20)}` },
      /USDC/,
    ],
    [{ PLAN_MAX_PRICE_USD: "1.0000001" }, /PLAN_MAX_PRICE_USD/],
    [{ BILLING_PAY_TO: "treasury" }, /BILLING_PAY_TO/],
  ] as const) {
    assert.throws(
      () => loadConfig(env),
      (e: unknown) => e instanceof ConfigError && message.test(e.message),
    );
  }
});
