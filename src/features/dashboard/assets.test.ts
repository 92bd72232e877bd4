import { test } from "node:test";
import assert from "node:assert/strict";
import { assetKey, describeNetworks } from "../../chains/index.js";
import { AssetCatalog } from "./assets.js";

const catalog = new AssetCatalog(describeNetworks(), assetKey);

test("every family's settlements get a symbol, token units and an explorer link", () => {
  const cases: [string, string, string, number, string][] = [
    // network, asset as requirements name it, symbol, decimals, explorer
    ["eip155:8453", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", "USDC", 6, "basescan.org"],
    [
      "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
      "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
      "USDC",
      6,
      "solscan.io",
    ],
    ["xrpl:0", "XRP", "XRP", 6, "livenet.xrpl.org"],
    ["xrpl:0", "524C555344000000000000000000000000000000", "RLUSD", 15, "livenet.xrpl.org"],
    [
      "near:mainnet",
      "17208628f84f5d6ad33f0da3bbbeb27ffcb398eac501a31bd6ad2011e36133a1",
      "USDC",
      6,
      "nearblocks.io",
    ],
    // Felts are spelled with and without padding, in either case.
    [
      "starknet:SN_MAIN",
      "0x33068f6539f8e6e6b131e6b2b814e6c34a5224bc66947c47dab9dfee93b35fb",
      "USDC",
      6,
      "voyager.online",
    ],
  ];
  for (const [network, asset, symbol, decimals, explorer] of cases) {
    assert.deepEqual(catalog.describe(network, asset), { symbol, decimals }, `${network} ${asset}`);
    assert.match(catalog.explorerUrl(network, "tx1") ?? "", new RegExp(explorer), network);
  }
});

test("an asset the families do not offer has no name; a local chain has no explorer", () => {
  assert.equal(
    catalog.describe("eip155:8453", "0x000000000000000000000000000000000000dead"),
    undefined,
  );
  const local = new AssetCatalog(describeNetworks(), assetKey, { explorers: false });
  assert.equal(local.explorerUrl("eip155:8453", "0xabc"), null);
});

test("each family names its native token, which fees are counted in", () => {
  const cases: [string, string, number][] = [
    ["eip155:8453", "ETH", 18],
    ["eip155:137", "POL", 18],
    ["eip155:43114", "AVAX", 18],
    ["eip155:42220", "CELO", 18],
    ["eip155:143", "MON", 18],
    ["solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp", "SOL", 9],
    ["near:mainnet", "NEAR", 24],
    ["xrpl:0", "XRP", 6],
    ["starknet:SN_MAIN", "STRK", 18],
  ];
  for (const [network, symbol, decimals] of cases) {
    assert.deepEqual(catalog.native(network), { symbol, decimals }, network);
  }
  assert.equal(catalog.native("eip155:1"), undefined, "a network not served");
});
