/**
 * Fees on a real chain (anvil): a new transaction offers twice the base fee
 * plus the tip, so it is still included after the base fee has risen for
 * two full blocks; an operator's ceiling lowers the offer to it, and refuses
 * only when today's price is already above it.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createPublicClient, createWalletClient, http, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevnet, type Devnet } from "../../../../devnet/evm/index.js";
import { FeeOracle, GasPriceTooHighError } from "./feeOracle.js";

describe("fee oracle", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let rpcUrl: string;
  let key: Hex;

  before(async () => {
    // One block per transaction: the base fee moves only when the test says.
    devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null, facilitators: 1 });
    const info = devnet.networks["eip155:8453"]!;
    rpcUrl = info.rpcUrl;
    key = info.facilitatorPrivateKeys[0] as Hex;
    client = createPublicClient({ transport: http(rpcUrl) });
  });
  after(() => devnet.stop());

  const today = async () => {
    const [block, tip] = await Promise.all([
      client.getBlock({ blockTag: "latest" }),
      client.estimateMaxPriorityFeePerGas(),
    ]);
    return { base: block.baseFeePerGas!, tip };
  };

  test("the offer is twice the base fee plus the tip, and survives two full blocks of rising base fee", async () => {
    const { base, tip } = await today();
    const fees = await new FeeOracle(client, 60_000, undefined).forNewTransaction();
    assert.equal(fees.maxPriorityFeePerGas, tip);
    assert.equal(fees.maxFeePerGas, 2n * base + tip);

    // Two full blocks raise the base fee by 12.5% each (×1.265625): above
    // the usual 1.2× offer, under this one.
    const raised = (base * 1_265_625n) / 1_000_000n + 1n;
    await client.request({
      method: "anvil_setNextBlockBaseFeePerGas" as never,
      params: [`0x${raised.toString(16)}`] as never,
    });
    const wallet = createWalletClient({
      account: privateKeyToAccount(key),
      transport: http(rpcUrl),
    });
    const hash = await wallet.sendTransaction({
      chain: null,
      to: "0x000000000000000000000000000000000000dEaD",
      value: 1n,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const receipt = await client.waitForTransactionReceipt({ hash });
    assert.equal(receipt.status, "success");
    assert.ok(receipt.effectiveGasPrice <= raised + tip, "paid the block's price, not the offer");
    assert.ok(receipt.effectiveGasPrice >= raised, "the block's base fee was the raised one");
  });

  test("a ceiling between today's price and the offer lowers the offer to the ceiling", async () => {
    const { base, tip } = await today();
    const ceiling = base + tip + base / 2n;
    const fees = await new FeeOracle(client, 60_000, ceiling).forNewTransaction();
    assert.equal(fees.maxFeePerGas, ceiling);
    assert.equal(fees.maxPriorityFeePerGas, tip);
  });

  test("a ceiling under today's price refuses", async () => {
    const { base, tip } = await today();
    const ceiling = base + tip - 1n;
    await assert.rejects(
      new FeeOracle(client, 60_000, ceiling).forNewTransaction(),
      (e: unknown) => e instanceof GasPriceTooHighError && e.ceiling === ceiling,
    );
  });
});
