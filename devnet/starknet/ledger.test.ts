/**
 * The local Starknet against starknet.js itself: it refuses what the chain
 * refuses (forged signatures, reused nonces, wrong callers, spent SNIP-9
 * nonces, expired windows) and applies what it accepts, with fees in STRK;
 * a revert names the calls it went up through, as a node's does.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Account, RpcError, RpcProvider, outsideExecution, stark, typedData } from "starknet";
import { STARKNET_STRK, STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import { simulateAsSent } from "../../src/chains/starknet/rpc.js";
import { devnetStarknetAccount, startStarknetLedger, type RunningStarknet } from "./index.js";

describe("the local Starknet", () => {
  let sn: RunningStarknet;
  let provider: RpcProvider;

  before(async () => {
    sn = await startStarknetLedger({ blockMs: 50 });
    provider = new RpcProvider({ nodeUrl: sn.info.rpcUrl });
  });
  after(async () => {
    await sn.stop();
  });

  const accountOf = (pair: { address: string; privateKey: string }) =>
    new Account({ provider, address: pair.address, signer: pair.privateKey, cairoVersion: "1" });
  const executor = () => accountOf(sn.executors[0]!);
  const payer = (i: number) => accountOf(sn.info.payers[i]!);
  const transferCall = (amount: number) => ({
    contractAddress: STARKNET_USDC,
    entrypoint: "transfer",
    calldata: [sn.info.payTo, amount, 0],
  });
  const now = () => Math.floor(Date.now() / 1000);
  const outside = (signer: Account, caller: string, amount: number, window = 300) =>
    signer.getOutsideTransaction(
      { caller, execute_after: 1, execute_before: now() + window },
      transferCall(amount),
      "2",
      stark.randomAddress(),
    );
  const rpcCode = async (p: Promise<unknown>) => {
    try {
      await p;
      return undefined;
    } catch (e) {
      assert.ok(e instanceof RpcError, String(e));
      return e.code;
    }
  };
  const included = async (hash: string) => {
    const receipt = await provider.waitForTransaction(hash, { retryInterval: 20 });
    return receipt.value as unknown as { execution_status: string; revert_reason?: string };
  };

  test("speaks spec 0.10 with the mainnet chain id", async () => {
    assert.equal(await provider.getSpecVersion(), "0.10.0");
    assert.equal(await provider.getChainId(), "0x534e5f4d41494e");
    assert.equal(await provider.getClassHashAt(sn.info.payTo).then((h) => typeof h), "string");
    assert.equal(await rpcCode(provider.getClassHashAt("0x1234")), 20);
  });

  test("is_valid_signature answers VALID for the account's key over a SNIP-12 hash, 0 otherwise", async () => {
    const ot = await outside(payer(0), sn.info.executors[0]!, 5);
    const td = outsideExecution.getTypedData(
      sn.info.chainId,
      {
        caller: ot.outsideExecution.caller,
        execute_after: 1,
        execute_before: ot.outsideExecution.execute_before,
      },
      ot.outsideExecution.nonce,
      [transferCall(5)],
      "2",
    );
    const hash = typedData.getMessageHash(td, payer(0).address);
    const sig = stark.formatSignature(ot.signature);
    const ask = (account: string, signature: string[]) =>
      provider.callContract({
        contractAddress: account,
        entrypoint: "is_valid_signature",
        calldata: [hash, String(signature.length), ...signature],
      });
    assert.deepEqual(await ask(payer(0).address, sig), ["0x56414c4944"]);
    // The same signature checked by another account (another key): refused.
    assert.deepEqual(await ask(payer(1).address, sig), ["0x0"]);
    // Once found valid it is remembered, for exactly that key, hash and (r, s):
    // asked again it is still VALID; changed in any part, refused.
    assert.deepEqual(await ask(payer(0).address, sig), ["0x56414c4944"]);
    const [r, s] = sig.map(BigInt) as [bigint, bigint];
    assert.deepEqual(
      await ask(payer(0).address, [`0x${r.toString(16)}`, `0x${(s + 1n).toString(16)}`]),
      ["0x0"],
    );
    const other = await provider.callContract({
      contractAddress: payer(0).address,
      entrypoint: "is_valid_signature",
      calldata: [`0x${(BigInt(hash) + 1n).toString(16)}`, String(sig.length), ...sig],
    });
    assert.deepEqual(other, ["0x0"]);
  });

  test("an outside execution runs once, from its caller only, and the executor pays the fee in STRK", async () => {
    const ot = await outside(payer(0), sn.info.executors[0]!, 1000);
    const call = outsideExecution.buildExecuteFromOutsideCall(ot);
    const usdcBefore = sn.ledger.balanceOf(STARKNET_USDC, sn.info.payTo);
    const strkBefore = sn.ledger.balanceOf(STARKNET_STRK, executor().address);
    // Another executor is not the caller the payer named: the call reverts.
    const wrong = await accountOf(sn.executors[1]!).execute(call, {
      tip: 0n,
      resourceBounds: bounds(),
    });
    assert.match((await included(wrong.transaction_hash)).revert_reason ?? "", /invalid caller/);
    const ok = await executor().execute(call, { tip: 0n });
    assert.equal((await included(ok.transaction_hash)).execution_status, "SUCCEEDED");
    assert.equal(sn.ledger.balanceOf(STARKNET_USDC, sn.info.payTo), usdcBefore + 1000n);
    const fee = sn.ledger.transaction(ok.transaction_hash)!.fee;
    assert.ok(fee > 0n);
    assert.equal(sn.ledger.balanceOf(STARKNET_STRK, executor().address), strkBefore - fee);
    // The same outside execution again: its nonce is spent.
    const again = await executor().execute(call, { tip: 0n, resourceBounds: bounds() });
    assert.match((await included(again.transaction_hash)).revert_reason ?? "", /duplicated nonce/);
    assert.equal(sn.ledger.balanceOf(STARKNET_USDC, sn.info.payTo), usdcBefore + 1000n);
  });

  test("a forged signature, an expired window and a bad transaction signature are refused", async () => {
    const ot = await outside(payer(1), sn.info.executors[0]!, 7);
    const forged = {
      ...ot,
      signature: stark.formatSignature(ot.signature).map((s, i) => (i === 1 ? "0x1234" : s)),
    };
    const bad = await executor().execute(outsideExecution.buildExecuteFromOutsideCall(forged), {
      tip: 0n,
      resourceBounds: bounds(),
    });
    assert.match((await included(bad.transaction_hash)).revert_reason ?? "", /invalid signature/);
    const expired = await payer(1).getOutsideTransaction(
      { caller: executor().address, execute_after: 1, execute_before: now() - 5 },
      transferCall(7),
      "2",
      stark.randomAddress(),
    );
    const late = await executor().execute(outsideExecution.buildExecuteFromOutsideCall(expired), {
      tip: 0n,
      resourceBounds: bounds(),
    });
    assert.match((await included(late.transaction_hash)).revert_reason ?? "", /execute_before/);
    // An INVOKE signed by a key that is not the sender's: refused at the gateway.
    const impostor = new Account({
      provider,
      address: executor().address,
      signer: devnetStarknetAccount("impostor").privateKey,
      cairoVersion: "1",
    });
    assert.equal(
      await rpcCode(impostor.execute(transferCall(1), { tip: 0n, resourceBounds: bounds() })),
      55,
    );
  });

  test("a revert names the calls it went up through, innermost last, in the receipt and the trace", async () => {
    // Payer 3 signs for more USDC than it holds: the token's transfer panics.
    const held = sn.ledger.balanceOf(STARKNET_USDC, payer(3).address);
    const ot = await outside(payer(3), sn.info.executors[0]!, Number(held) + 1);
    const sent = await executor().execute(outsideExecution.buildExecuteFromOutsideCall(ot), {
      tip: 0n,
      resourceBounds: bounds(),
    });
    const reason = (await included(sent.transaction_hash)).revert_reason ?? "";
    const frames = [...reason.matchAll(/Error in contract \(contract address: (0x[0-9a-f]+)/g)];
    assert.deepEqual(
      frames.map((m) => BigInt(m[1]!)),
      [executor().address, payer(3).address, STARKNET_USDC].map(BigInt),
      reason,
    );
    assert.match(reason, /^Transaction execution has failed:\n0: Error in the called contract/);
    assert.match(reason, /\('ERC20: insufficient balance'\)\.\n$/);
    const trace = (await provider.getTransactionTrace(sent.transaction_hash)) as unknown as {
      execute_invocation: { revert_reason?: string };
    };
    assert.equal(trace.execute_invocation.revert_reason, reason);
  });

  test("an account can read the transaction it runs in: a simulation without validation looks unlike the send", async () => {
    const hostile = payer(4);
    sn.ledger.setQuirk(hostile.address, "tellsSimulation");
    try {
      const ot = await outside(hostile, sn.info.executors[0]!, 9);
      const call = outsideExecution.buildExecuteFromOutsideCall(ot);
      const revertOf = (sim: unknown) =>
        (sim as { transaction_trace: { execute_invocation: { revert_reason?: string } } }[])[0]!
          .transaction_trace.execute_invocation.revert_reason;
      // starknet.js's default simulation: no signature, no bounds. It passes.
      const query = await executor().simulateTransaction([{ type: "INVOKE", payload: call }], {
        tip: 0n,
        skipValidate: true,
      });
      assert.equal(revertOf(query.simulated_transactions), undefined);
      // The transaction as it would be sent, validated: the account panics in its own frame.
      const signed = await executor().getSignedTransaction(call, {
        tip: 0n,
        resourceBounds: bounds(),
      });
      const asSent = await simulateAsSent(provider, [signed], "pre_confirmed", []);
      const reason = revertOf(asSent) ?? "";
      const frames = [...reason.matchAll(/Error in contract \(contract address: (0x[0-9a-f]+)/g)];
      assert.equal(BigInt(frames.at(-1)![1]!), BigInt(hostile.address), reason);
      assert.match(reason, /invalid caller/);
    } finally {
      sn.ledger.setQuirk(hostile.address, undefined);
    }
  });

  test("a fee the sender cannot cover and a nonce already used are refused; withheld transactions wait until released", async () => {
    const sender = payer(2);
    const nonce = BigInt(await provider.getNonceForAddress(sender.address, "pre_confirmed"));
    // Payers hold no STRK: a transaction of their own cannot pay its fee.
    assert.equal(
      await rpcCode(sender.execute(transferCall(3), { tip: 0n, nonce, resourceBounds: bounds() })),
      54,
    );
    sn.ledger.mint(STARKNET_STRK, sender.address, 10n ** 18n);
    sn.ledger.withhold = true;
    let hash: string;
    try {
      hash = (await sender.execute(transferCall(3), { tip: 0n, nonce, resourceBounds: bounds() }))
        .transaction_hash;
      assert.equal(
        await rpcCode(
          sender.execute(transferCall(4), { tip: 0n, nonce, resourceBounds: bounds() }),
        ),
        52,
      );
      const status = await provider.getTransactionStatus(hash);
      assert.equal(status.finality_status, "RECEIVED");
      assert.equal(await rpcCode(provider.getTransactionReceipt(hash)), 29);
    } finally {
      sn.ledger.release();
    }
    assert.equal((await included(hash)).execution_status, "SUCCEEDED");
    assert.equal(sn.ledger.nonceOf(sender.address), nonce + 1n);
  });
});

/** Generous fixed resource bounds, so a reverting call is sent rather than refused at estimation. */
function bounds() {
  return {
    l1_gas: { max_amount: 0n, max_price_per_unit: 40_000_000_000_000n },
    l2_gas: { max_amount: 5_000_000n, max_price_per_unit: 10_000_000_000n },
    l1_data_gas: { max_amount: 500n, max_price_per_unit: 2_000_000_000n },
  };
}
