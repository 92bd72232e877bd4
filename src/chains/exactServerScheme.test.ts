/**
 * Dollar prices become each network's stablecoin amount through the shared
 * server scheme: atomic units where the token has them, a decimal value on
 * the XRP Ledger, never rounded, never zero, never another currency.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { ExactNearServerScheme } from "./near/clients/exactServer.js";
import { ExactXrplServerScheme } from "./xrpl/clients/exactServer.js";
import { ExactStarknetServerScheme } from "./starknet/clients/exactServer.js";
import { NEAR_USDC } from "./near/networks.js";
import { RLUSD_CURRENCY, RLUSD_ISSUER } from "./xrpl/networks.js";

test("a dollar price is the stablecoin's amount on each network", async () => {
  assert.deepEqual(await new ExactNearServerScheme().parsePrice("$0.25", "near:mainnet"), {
    amount: "250000",
    asset: NEAR_USDC,
  });
  assert.deepEqual(await new ExactXrplServerScheme().parsePrice("$0.25", "xrpl:0"), {
    amount: "0.25",
    asset: RLUSD_CURRENCY,
    extra: { issuer: RLUSD_ISSUER },
  });
  const starknet = await new ExactStarknetServerScheme().parsePrice("1.5", "starknet:SN_MAIN");
  assert.equal(starknet.amount, "1500000");
  assert.equal(
    BigInt(starknet.asset),
    0x033068f6539f8e6e6b131e6b2b814e6c34a5224bc66947c47dab9dfee93b35fbn,
  );
});

test("prices that cannot be paid exactly are refused, and explicit amounts pass through", async () => {
  const near = new ExactNearServerScheme();
  for (const bad of ["$0.0000001", "$0", "1.50 EUR", "ten dollars", "-1"]) {
    await assert.rejects(near.parsePrice(bad, "near:mainnet"), /price/, bad);
  }
  const explicit = { amount: "42", asset: "other-token.near" };
  assert.deepEqual(await near.parsePrice(explicit, "near:mainnet"), explicit);
});
