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
  assert.deepEqual(c.devnet.networks, ["eip155:8453"]);
  assert.equal(c.devnet.blockTimeSeconds, 1);
});

test("RPC URLs and keys switch to production mode", () => {
  const c = loadConfig({
    EVM_RPC_URLS_8453: "https://a.example, https://b.example",
    EVM_PRIVATE_KEYS: `${KEY},${KEY.replace("ab", "cd")}`,
  });
  assert.equal(c.mode, "production");
  assert.equal(c.host, "0.0.0.0");
  assert.deepEqual(c.chains.evm!.networks, [
    {
      id: "eip155:8453",
      rpcUrls: ["https://a.example", "https://b.example"],
      maxGasPriceWei: undefined,
    },
  ]);
  assert.equal(c.chains.evm!.privateKeys.length, 2);
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
  assert.deepEqual(c.chains.evm!.privateKeys, [KEY]);
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

test("DEVNET_NETWORKS=all lists every network, the Permit2 (USDG) one included", () => {
  const c = loadConfig({ DEVNET_NETWORKS: "all" });
  assert.equal(c.devnet.networks.length, 11);
  assert.ok(c.devnet.networks.includes("eip155:4663"));
});

test("a per-network gas price ceiling is read in gwei", () => {
  const c = loadConfig({
    EVM_RPC_URLS_8453: "https://a.example",
    EVM_PRIVATE_KEYS: KEY,
    EVM_MAX_GAS_PRICE_GWEI_8453: "0.5",
  });
  assert.equal(c.chains.evm!.networks[0]!.maxGasPriceWei, 500_000_000n);
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
