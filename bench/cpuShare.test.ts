import { test } from "node:test";
import assert from "node:assert/strict";
import { combineCpuShares } from "./cpuShare.js";

test("spans combine weighted by how long each lasted; unmeasured spans are left out", () => {
  const combined = combineCpuShares([
    { share: { node: 0.2, server: 1.0, loadGenerator: 0.1 }, seconds: 10 },
    { share: { node: 0.5, server: 0.4, loadGenerator: 0.4 }, seconds: 30 },
    { share: undefined, seconds: 100 },
  ]);
  assert.ok(combined);
  assert.ok(Math.abs(combined.node - 0.425) < 1e-9);
  assert.ok(Math.abs(combined.server - 0.55) < 1e-9);
  assert.ok(Math.abs(combined.loadGenerator - 0.325) < 1e-9);
  assert.equal(combineCpuShares([{ share: undefined, seconds: 5 }]), undefined);
});
