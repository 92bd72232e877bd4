/**
 * Reconciling from the chain (anvil): a settlement whose transaction is
 * mined between the reconciler's first look for a receipt and its read of
 * the authorization is ours and succeeded, not "used by another
 * transaction"; an authorization really used by someone else is a failure
 * with nothing of ours moved.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  http,
  keccak256,
  parseAbi,
  type Hex,
  type PublicClient,
  TransactionReceiptNotFoundError,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { startDevnet, type Devnet } from "../../devnet/evm/index.js";
import { requirementsFor, signPayment } from "../chains/evm/payments.js";
import { reconcileEvmSettlement } from "../../src/chains/evm/payment/reconcile.js";

const TRANSFER = parseAbi([
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
]);

interface Authorization {
  from: Hex;
  to: Hex;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: Hex;
}

describe("EVM reconcile", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let rpcUrl: string;
  let usdc: Hex;
  let payers: Hex[];
  let relayers: Hex[];

  before(async () => {
    // One block per transaction: a sent transaction is mined at once.
    devnet = await startDevnet({ blockTimeSeconds: 0, outFile: null, payers: 2, facilitators: 2 });
    const info = devnet.networks["eip155:8453"]!;
    rpcUrl = info.rpcUrl;
    usdc = info.assets["USDC"] as Hex;
    payers = info.payerPrivateKeys as Hex[];
    relayers = info.facilitatorPrivateKeys as Hex[];
    client = createPublicClient({ transport: http(rpcUrl) });
  });
  after(() => devnet.stop());

  /** A payment signed by `payer` with the official client. */
  async function payment(payer: Hex) {
    const requirements = requirementsFor({
      network: "eip155:8453",
      usdc,
      payTo: "0x000000000000000000000000000000000000bbbb",
      amount: "1000",
    });
    const paymentPayload = await signPayment(payer, requirements);
    return { paymentPayload, paymentRequirements: requirements };
  }

  /** The settlement transaction carrying `request`, signed (not sent) by `relayer`. */
  async function carry(request: Awaited<ReturnType<typeof payment>>, relayer: Hex) {
    const { authorization: a, signature } = request.paymentPayload.payload as {
      authorization: Authorization;
      signature: Hex;
    };
    const wallet = createWalletClient({
      account: privateKeyToAccount(relayer),
      transport: http(rpcUrl),
    });
    const prepared = await wallet.prepareTransactionRequest({
      chain: null,
      to: usdc,
      data: encodeFunctionData({
        abi: TRANSFER,
        functionName: "transferWithAuthorization",
        args: [
          a.from,
          a.to,
          BigInt(a.value),
          BigInt(a.validAfter),
          BigInt(a.validBefore),
          a.nonce,
          signature,
        ],
      }),
    });
    const raw = await wallet.signTransaction({ ...prepared, chain: null } as never);
    return { hash: keccak256(raw), raw };
  }

  /** The node as seen by a reconciler whose first receipt lookups came just before the block. */
  function lookingTooEarly(misses: number): PublicClient {
    let left = misses;
    return new Proxy(client, {
      get(target, key, receiver) {
        if (key === "getTransactionReceipt") {
          return (args: { hash: Hex }) =>
            left-- > 0
              ? Promise.reject(new TransactionReceiptNotFoundError({ hash: args.hash }))
              : target.getTransactionReceipt(args);
        }
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
  }

  test("ours mined between the first look and the authorization read: succeeded", async () => {
    const request = await payment(payers[0]!);
    const journaled = await carry(request, relayers[0]!);
    await client.sendRawTransaction({ serializedTransaction: journaled.raw });
    const mined = await client.waitForTransactionReceipt({ hash: journaled.hash });
    assert.equal(mined.status, "success");

    const outcome = await reconcileEvmSettlement(lookingTooEarly(1), request, [journaled]);
    assert.deepEqual(outcome, { status: "succeeded", transaction: journaled.hash });
  });

  test("the authorization used by another transaction: failed, and ours is not sent", async () => {
    const request = await payment(payers[1]!);
    const ours = await carry(request, relayers[0]!);
    const theirs = await carry(request, relayers[1]!);
    await client.sendRawTransaction({ serializedTransaction: theirs.raw });
    assert.equal((await client.waitForTransactionReceipt({ hash: theirs.hash })).status, "success");

    const ourAccount = privateKeyToAccount(relayers[0]!).address;
    const sentBefore = await client.getTransactionCount({ address: ourAccount });
    const outcome = await reconcileEvmSettlement(client, request, [ours]);
    assert.equal(outcome.status, "failed");
    assert.match(outcome.status === "failed" ? outcome.message : "", /another transaction/);
    await assert.rejects(
      client.getTransactionReceipt({ hash: ours.hash }),
      /not found|could not be found/i,
    );
    assert.equal(
      await client.getTransactionCount({ address: ourAccount }),
      sentBefore,
      "nothing was sent from our account",
    );
  });
});
