/**
 * The unit lane's guard (scripts/unitLane.mjs): a test that starts a
 * database or a chain, or imports anything of the devnet (every local
 * ledger is there), is refused; one that only reads and computes is not.
 * The sources below are written in pieces so this file is not one of them.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { ioIn } from "./unitLane.mjs";

const up = "../../../";
const devnet = "devnet";

test("a test importing devnet/ is refused, whatever it imports from there", () => {
  for (const source of [
    `import { startStarknetLedger } from "${up}${devnet}/starknet/index.js";`,
    `import type { RunningXrpl } from '${up}${devnet}/xrpl/index.js';`,
    `const { startNearLedger } = await import("${up}${devnet}/near/index.js");`,
    `import { x } from "./${devnet}/families.js";`,
  ]) {
    assert.equal(ioIn(source), "imports devnet/", source);
  }
});

test("a test opening a database or starting anvil is refused by the call", () => {
  for (const call of [`open${"MigratedDb"}`, `start${"Anvil"}`, `new ${"PGlite"}`]) {
    assert.equal(ioIn(`const it = await ${call}(options);`), `calls ${call}`);
  }
});

test("a test that reads and computes is kept, even one that names the devnet in prose", () => {
  assert.equal(
    ioIn(`import { x } from "./networks.js"; // the ${devnet}/ ledger's ids`),
    undefined,
  );
  assert.equal(ioIn(`import { y } from "../${devnet}Things.js";`), undefined);
});
