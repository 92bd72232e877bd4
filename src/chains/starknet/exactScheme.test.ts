import { test } from "node:test";
import assert from "node:assert/strict";
import { RESOURCE_CEILINGS, boundsAboveCeilings } from "./exactScheme.js";
import type { ResourceBounds } from "./executors.js";

const bounds = (l2: bigint, l1Data: bigint, l1: bigint): ResourceBounds =>
  ({
    l2_gas: { max_amount: l2, max_price_per_unit: 12_000_000_000n },
    l1_data_gas: { max_amount: l1Data, max_price_per_unit: 1_000n },
    l1_gas: { max_amount: l1, max_price_per_unit: 50_000_000_000_000n },
  }) as unknown as ResourceBounds;

test("an honest settlement's bounds on the local node are within every gas ceiling", () => {
  // 850,000 L2 gas and 192 L1 data gas, with starknet.js's 1.5 margin.
  assert.deepEqual(boundsAboveCeilings(bounds(1_275_000n, 288n, 0n)), []);
  assert.deepEqual(
    boundsAboveCeilings(
      bounds(RESOURCE_CEILINGS.l2_gas, RESOURCE_CEILINGS.l1_data_gas, RESOURCE_CEILINGS.l1_gas),
    ),
    [],
  );
});

test("an account that burns gas in its signature check cannot raise the bounds past a ceiling: each resource is named", () => {
  assert.deepEqual(boundsAboveCeilings(bounds(15_000_001n, 288n, 0n)), [
    "l2_gas: 15000001 > 15000000",
  ]);
  assert.deepEqual(boundsAboveCeilings(bounds(1_275_000n, 2_001n, 20_001n)), [
    "l1_data_gas: 2001 > 2000",
    "l1_gas: 20001 > 20000",
  ]);
  // Amounts as the node's hex strings count the same.
  assert.deepEqual(
    boundsAboveCeilings({
      l2_gas: { max_amount: "0x3b9aca00", max_price_per_unit: "0x1" },
      l1_data_gas: { max_amount: "0x120", max_price_per_unit: "0x1" },
      l1_gas: { max_amount: "0x0", max_price_per_unit: "0x1" },
    } as unknown as ResourceBounds),
    ["l2_gas: 1000000000 > 15000000"],
  );
});
