import { test } from "node:test";
import assert from "node:assert/strict";
import { RESOURCE_CEILINGS, boundsAboveCeilings } from "./exactScheme.js";
import { causeOfRevert, parseRevert } from "./revertCause.js";
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

const PAYER = 0x0123n;
const ASSET = 0x053c91253bc9682c04929ca02ed00b3e423f6710d2ee7e0d5ebb06f3ecf368a8n;
const EXECUTOR = 0x0777n;
const felt64 = (v: bigint) => `0x${v.toString(16).padStart(64, "0")}`;
const frame = (address: bigint) =>
  `Error in contract (contract address: ${felt64(address)}, class hash: 0x05b4, selector: 0x015d):`;
/** A revert reason as a node writes it: the calls it went up through, then the panic. */
const revert = (frames: bigint[], panic: string) =>
  [
    "Transaction execution has failed:",
    `0: Error in the called contract (contract address: ${felt64(frames[0]!)}, class hash: 0x05b4, selector: 0x015d):`,
    "Execution failed. Failure reason:",
    ...frames.map(frame),
    `${panic}.`,
    "",
  ].join("\n");
const parties = { payer: PAYER, asset: ASSET };

test("a revert that arose in the payer's own account is the payer's, whatever its text", () => {
  // 'caller' used to read as the requirements' fault.
  const caller = revert([EXECUTOR, PAYER], "0x5352433... ('SRC9: invalid caller')");
  assert.equal(causeOfRevert(caller, parties), "payer");
  assert.equal(causeOfRevert(revert([EXECUTOR, PAYER], "0x1 ('anything')"), parties), "payer");
  // A call the payer's account made on its own (not the asset's transfer).
  assert.equal(causeOfRevert(revert([EXECUTOR, PAYER, 0x999n], "0x1 ('x')"), parties), "payer");
});

test("the asset's transfer refusing for want of the payer's balance is the payer's; refusing otherwise is not", () => {
  const short = revert([EXECUTOR, PAYER, ASSET], "0x4552... ('ERC20: insufficient balance')");
  assert.equal(causeOfRevert(short, parties), "payer");
  const overflow = revert([EXECUTOR, PAYER, ASSET], "0x7532... ('u256_sub Overflow')");
  assert.equal(causeOfRevert(overflow, parties), "payer");
  const paused = revert([EXECUTOR, PAYER, ASSET], "0x5061... ('Pausable: paused')");
  assert.equal(causeOfRevert(paused, parties), "requirements");
});

test("a revert before the payer's account ran is not the payer's, even when its text says nonce or balance", () => {
  const ours = revert([EXECUTOR], "0x4f75... ('Out of gas')");
  assert.equal(causeOfRevert(ours, parties), "requirements");
  assert.equal(
    causeOfRevert(revert([EXECUTOR], "0x1 ('insufficient balance')"), parties),
    "requirements",
  );
});

test("frames imitated inside a panic message are not read: the payer's account still answers for it", () => {
  const forged = revert(
    [EXECUTOR, PAYER],
    `0x46a6158a16a947e5916b2a2ca68501a45e93d7110e81aa2d6438b1c57c879a3 ("\n${frame(ASSET)}\n0x1 ('Pausable: paused')")`,
  );
  assert.deepEqual(parseRevert(forged).frames, [EXECUTOR, EXECUTOR, PAYER]);
  assert.equal(causeOfRevert(forged, parties), "payer");
});

test("a reason without frames falls back to its text", () => {
  assert.equal(causeOfRevert("ERC20: insufficient balance", parties), "payer");
  assert.equal(causeOfRevert("SRC9: invalid caller", parties), "requirements");
  assert.deepEqual(parseRevert("SRC9: invalid caller").frames, []);
});
