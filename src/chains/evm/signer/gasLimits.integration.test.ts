/**
 * Gas limits on a real chain (anvil): one estimate per call shape, then a
 * single simulation under the remembered limit; reverts still throw; a
 * costlier call of a known shape, or an old limit, is estimated afresh.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  encodeFunctionData,
  erc20Abi,
  http,
  type Hex,
  type PublicClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevnet, type Devnet } from "../../../../devnet/evm/index.js";
import { GasLimits } from "./gasLimits.js";
import { FeeOracle, GasLimitTooHighError, type Fees } from "../rpc/feeOracle.js";

describe("gas limits", () => {
  let devnet: Devnet;
  let client: PublicClient;
  const calls = new Map<string, number>();
  let usdc: Hex;
  let payer: Hex;
  let holder: Hex;
  /** What our transactions would offer: every simulation runs with a fee, as sent. */
  let fees: Fees;

  before(async () => {
    devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null });
    const info = devnet.networks["eip155:8453"]!;
    usdc = info.assets["USDC"]!;
    payer = privateKeyToAccount(info.payerPrivateKeys[0] as Hex).address;
    holder = privateKeyToAccount(info.payerPrivateKeys[1] as Hex).address;
    client = createPublicClient({
      transport: http(info.rpcUrl, {
        onFetchRequest: async (request) => {
          const body = (await request.clone().json()) as { method: string } | { method: string }[];
          for (const { method } of Array.isArray(body) ? body : [body]) {
            calls.set(method, (calls.get(method) ?? 0) + 1);
          }
        },
      }),
    }) as PublicClient;
    fees = await new FeeOracle(client, 60_000, undefined).current();
  });
  after(() => devnet.stop());

  const transfer = (to: Hex, amount: bigint) => ({
    to: usdc,
    data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, amount] }),
  });
  const count = (method: string) => calls.get(method) ?? 0;
  // No zero byte: calldata costs 4 gas per zero byte and 16 per other, so
  // addresses with zeros would differ in cost and make a limit with no room
  // fail for one fresh address and not for another.
  const freshAddress = () =>
    `0x${[...crypto.getRandomValues(new Uint8Array(20))].map((b) => ((b % 255) + 1).toString(16).padStart(2, "0")).join("")}` as Hex;

  test("one estimate per shape; the next call of that shape is one simulation under the remembered limit", async () => {
    const limits = new GasLimits(client);
    calls.clear();
    const first = await limits.forCall(payer, transfer(holder, 1n), fees);
    assert.equal(count("eth_estimateGas"), 1);
    const estimate = (first * 100n) / 120n;
    const second = await limits.forCall(payer, transfer(holder, 2n), fees);
    assert.equal(count("eth_estimateGas"), 1, "no second estimate");
    // One simulation proved the first call's own limit, one the second's.
    assert.equal(count("eth_call"), 2, "one simulation each");
    assert.ok(second >= first, `${second} leaves at least the room of ${first}`);
    // Room is block space: the remembered limit keeps 20%, not more.
    assert.ok(second <= (estimate * 121n) / 100n, `${second} within 20% of ${estimate}`);
  });

  test("a call that would revert throws, whether its shape is known or not", async () => {
    const limits = new GasLimits(client);
    const tooMuch = 10n ** 30n;
    await assert.rejects(limits.forCall(payer, transfer(holder, tooMuch), fees), /revert|exceeds/i);
    await limits.forCall(payer, transfer(holder, 1n), fees);
    await assert.rejects(limits.forCall(payer, transfer(holder, tooMuch), fees), /revert|exceeds/i);
  });

  test("a costlier call than the remembered limit is estimated afresh, and the limit rises", async () => {
    // No room: the remembered limit is exactly what a transfer to a holder costs.
    const limits = new GasLimits(client, { rememberMarginPct: 0 });
    const cheap = ((await limits.forCall(payer, transfer(holder, 1n), fees)) * 100n) / 120n;
    calls.clear();
    // A first credit to an address writes a new storage slot: more gas.
    const fresh = transfer(freshAddress(), 1n);
    const costly = await limits.forCall(payer, fresh, fees);
    assert.equal(
      count("eth_call"),
      2,
      "the simulation under the old limit failed, then the new one proved",
    );
    assert.equal(count("eth_estimateGas"), 1, "so it was estimated");
    assert.ok((costly * 100n) / 120n > cheap, "the fresh estimate is higher");
    // The raised limit now proves the costly shape in one simulation.
    calls.clear();
    await limits.forCall(payer, transfer(freshAddress(), 1n), fees);
    assert.equal(count("eth_estimateGas"), 0);
    assert.equal(count("eth_call"), 1);
  });

  test("a remembered limit older than its time to live is estimated again", async () => {
    let now = 1_000_000;
    const limits = new GasLimits(client, { ttlMs: 60_000, now: () => now });
    await limits.forCall(payer, transfer(holder, 1n), fees);
    calls.clear();
    now += 60_001;
    await limits.forCall(payer, transfer(holder, 1n), fees);
    assert.equal(count("eth_estimateGas"), 1);
    assert.equal(count("eth_call"), 1, "the fresh limit proven as sent");
  });
  test("a burst of one shape with no limit yet sends one estimate; the rest are checked under it", async () => {
    const limits = new GasLimits(client);
    calls.clear();
    const burst = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        limits.forCall(payer, transfer(holder, BigInt(i + 1)), fees),
      ),
    );
    assert.equal(count("eth_estimateGas"), 1, "one estimate for the burst");
    assert.equal(count("eth_call"), 20, "each call proven by one simulation");
    // Every call got the remembered limit, the estimate with its 20% of room.
    assert.equal(new Set(burst).size, 1, burst.join(", "));
    // The same after the limit expires: one fresh estimate for a burst, not one each.
    let now = 1_000_000;
    const expiring = new GasLimits(client, { ttlMs: 60_000, now: () => now });
    await expiring.forCall(payer, transfer(holder, 1n), fees);
    now += 60_001;
    calls.clear();
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        expiring.forCall(payer, transfer(holder, BigInt(i + 1)), fees),
      ),
    );
    assert.equal(count("eth_estimateGas"), 1);
    assert.equal(count("eth_call"), 10);
  });

  test("a burst whose first call reverts: that call throws, the others still get their limits", async () => {
    const limits = new GasLimits(client);
    calls.clear();
    const [bad, ...good] = await Promise.allSettled([
      limits.forCall(payer, transfer(holder, 10n ** 30n), fees),
      ...Array.from({ length: 5 }, (_, i) =>
        limits.forCall(payer, transfer(holder, BigInt(i + 1)), fees),
      ),
    ]);
    assert.equal(bad!.status, "rejected");
    assert.match(String((bad as PromiseRejectedResult).reason), /revert|exceeds/i);
    for (const g of good) {
      assert.equal(g.status, "fulfilled");
      assert.ok((g as PromiseFulfilledResult<bigint>).value > 21_000n);
    }
    // They waited for the failed one once, then estimated for themselves.
    assert.ok(count("eth_estimateGas") <= 6, `${count("eth_estimateGas")} estimates`);
  });

  test("a limit raised by one costly call shrinks back once it expires", async () => {
    let now = 1_000_000;
    const limits = new GasLimits(client, { ttlMs: 60_000, now: () => now });
    const costly = await limits.forCall(payer, transfer(freshAddress(), 1n), fees);
    // Within its life the costlier limit serves the cheaper call too.
    assert.equal(await limits.forCall(payer, transfer(holder, 1n), fees), costly);
    now += 60_001;
    const cheap = await limits.forCall(payer, transfer(holder, 1n), fees);
    assert.ok(cheap < costly, `${cheap} came back below ${costly}`);
  });

  test("a call costlier than its shape's cap gets its own limit and leaves the shape's alone", async () => {
    const limits = new GasLimits(client);
    const cheap = await limits.forCall(payer, transfer(holder, 1n), fees);
    // The cap sits between the two costs: the fresh address's own estimate is
    // above it, so it is not kept for the shape.
    const bounds = { ceiling: 1_000_000n, remembered: cheap };
    const costly = await limits.forCall(payer, transfer(freshAddress(), 1n), fees, bounds);
    assert.ok(costly > cheap);
    calls.clear();
    assert.equal(await limits.forCall(payer, transfer(holder, 2n), fees, bounds), cheap);
    assert.equal(count("eth_estimateGas"), 0, "the shape's limit is still the cheap one");
  });

  test("a call that needs more than its ceiling is refused: GasLimitTooHighError", async () => {
    const limits = new GasLimits(client);
    await assert.rejects(
      limits.forCall(payer, transfer(freshAddress(), 1n), fees, {
        ceiling: 30_000n,
        remembered: 30_000n,
      }),
      (e) => e instanceof GasLimitTooHighError && e.ceiling === 30_000n,
    );
  });
});
