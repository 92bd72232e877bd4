/**
 * The local NEAR chain applies what nearcore applies and refuses what it
 * refuses: relayed delegate actions move USDC once, a replayed or expired
 * delegate fails its receipt while the outer transaction succeeds, and the
 * outer transaction's signature, nonce and balance are checked on submission.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KeyPair } from "@near-js/crypto";
import { KeyPairSigner } from "@near-js/signers";
import {
  actionCreators,
  buildDelegateAction,
  createTransaction,
  Signature,
  SignedDelegate,
} from "@near-js/transactions";
import { baseDecode, baseEncode } from "@near-js/utils";
import { startNearLedger, type RunningNear } from "./index.js";

const TGAS = 10n ** 12n;

async function post(url: string, method: string, params: unknown) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- RPC answers are read field by field
  return (await res.json()) as { result?: any; error?: any };
}

describe("local NEAR chain", () => {
  let near: RunningNear;
  let payer: { accountId: string; key: KeyPair };
  let relayer: { accountId: string; key: KeyPair };

  before(async () => {
    // Blocks only when the test asks for them.
    near = await startNearLedger({ blockMs: 60_000, waitTimeoutMs: 200 });
    payer = {
      accountId: near.info.payers[0]!.accountId,
      key: KeyPair.fromString(near.info.payers[0]!.secretKey as never),
    };
    relayer = {
      accountId: near.info.relayers[0]!.accountId,
      key: KeyPair.fromString(near.info.relayers[0]!.secretKey as never),
    };
  });
  after(() => near.stop());

  async function signedDelegate(
    opts: { amount?: string; nonceOffset?: bigint; ahead?: bigint; forgedBy?: KeyPair } = {},
  ) {
    const ak = near.ledger.accessKey(payer.accountId, payer.key.getPublicKey().toString())!;
    const da = buildDelegateAction({
      senderId: payer.accountId,
      receiverId: near.info.assets.USDC,
      actions: [
        actionCreators.functionCall(
          "ft_transfer",
          { receiver_id: near.info.payTo, amount: opts.amount ?? "1000" },
          30n * TGAS,
          1n,
        ),
      ],
      nonce: ak.nonce + 1n + (opts.nonceOffset ?? 0n),
      maxBlockHeight: BigInt(near.ledger.head.height) + (opts.ahead ?? 10n),
      publicKey: payer.key.getPublicKey(),
    });
    const [hash, sd] = await new KeyPairSigner(payer.key).signDelegateAction(da);
    if (!opts.forgedBy) return sd;
    // The payer's key named, another key's signature over the same action.
    return new SignedDelegate({
      delegateAction: sd.delegateAction,
      signature: new Signature({ keyType: 0, data: opts.forgedBy.sign(hash).signature }),
    });
  }

  async function relay(sd: SignedDelegate, nonce?: bigint) {
    const ak = near.ledger.accessKey(relayer.accountId, relayer.key.getPublicKey().toString())!;
    const tx = createTransaction(
      relayer.accountId,
      relayer.key.getPublicKey(),
      payer.accountId,
      nonce ?? ak.nonce + 1n,
      [actionCreators.signedDelegate(sd)],
      baseDecode(near.ledger.head.hash),
    );
    const [hash, signed] = await new KeyPairSigner(relayer.key).signTransaction(tx);
    return { base64: Buffer.from(signed.encode()).toString("base64"), hash: baseEncode(hash) };
  }

  async function send(sd: SignedDelegate) {
    const { base64, hash } = await relay(sd);
    const sent = await post(near.info.rpcUrl, "send_tx", {
      signed_tx_base64: base64,
      wait_until: "NONE",
    });
    assert.equal(sent.result?.final_execution_status, "NONE", JSON.stringify(sent.error));
    return hash;
  }

  const finalize = () => {
    for (let i = 0; i < 3; i++) near.ledger.produce();
  };

  it("moves USDC once for a relayed delegate action, at the relayer's cost", async () => {
    const usdc = near.ledger.token(near.info.assets.USDC)!;
    const before = {
      payer: usdc.balanceOf(payer.accountId),
      payTo: usdc.balanceOf(near.info.payTo),
    };
    const relayerNear = near.ledger.balance(relayer.accountId);
    const payerNear = near.ledger.balance(payer.accountId);
    const sd = await signedDelegate();
    await send(sd);
    finalize();
    assert.equal(usdc.balanceOf(payer.accountId), before.payer - 1000n);
    assert.equal(usdc.balanceOf(near.info.payTo), before.payTo + 1000n);
    assert.ok(near.ledger.balance(relayer.accountId) < relayerNear, "the relayer paid the gas");
    assert.equal(near.ledger.balance(payer.accountId), payerNear, "the payer paid no gas");

    // The same delegate again: its nonce is spent; the receipt fails, nothing moves.
    const again = await send(sd);
    finalize();
    assert.equal(usdc.balanceOf(payer.accountId), before.payer - 1000n);
    assert.match(
      JSON.stringify(near.ledger.transaction(again)!.receiptsOutcome),
      /DelegateActionInvalidNonce/,
    );
  });

  it("reports a failing ft_transfer in its receipt while the outer status succeeds", async () => {
    const tx = await send(await signedDelegate({ amount: "100000000000000" }));
    finalize();
    const view = await post(near.info.rpcUrl, "tx", {
      tx_hash: tx,
      sender_account_id: relayer.accountId,
      wait_until: "FINAL",
    });
    assert.equal(view.result.final_execution_status, "FINAL");
    assert.ok("SuccessValue" in view.result.status, "the outer status is a success");
    const failed = (
      view.result.receipts_outcome as { outcome: { status: { Failure?: unknown } } }[]
    ).find((r) => r.outcome.status.Failure)!;
    assert.match(JSON.stringify(failed.outcome.status), /doesn't have enough balance/);
  });

  it("fails an expired delegate action and one signed by another key", async () => {
    const usdc = near.ledger.token(near.info.assets.USDC)!;
    const before = usdc.balanceOf(payer.accountId);
    const expired = await signedDelegate({ ahead: 0n });
    near.ledger.produce();
    const late = await send(expired);
    near.ledger.produce();
    const forged = await send(await signedDelegate({ forgedBy: KeyPair.fromRandom("ed25519") }));
    finalize();
    assert.match(JSON.stringify(near.ledger.transaction(late)!.status), /DelegateActionExpired/);
    assert.match(
      JSON.stringify(near.ledger.transaction(forged)!.status),
      /DelegateActionInvalidSignature/,
    );
    assert.equal(usdc.balanceOf(payer.accountId), before);
  });

  it("refuses on submission a used relayer nonce, a bad signature and an unknown block hash", async () => {
    const sd = await signedDelegate();
    const ak = near.ledger.accessKey(relayer.accountId, relayer.key.getPublicKey().toString())!;
    const stale = await post(near.info.rpcUrl, "send_tx", {
      signed_tx_base64: (await relay(sd, ak.nonce)).base64,
      wait_until: "NONE",
    });
    assert.equal(stale.error?.cause?.name, "INVALID_TRANSACTION");
    assert.match(JSON.stringify(stale.error), /InvalidNonce/);

    const bytes = Buffer.from((await relay(sd)).base64, "base64");
    bytes[bytes.length - 1]! ^= 1;
    const bad = await post(near.info.rpcUrl, "send_tx", {
      signed_tx_base64: bytes.toString("base64"),
      wait_until: "NONE",
    });
    assert.match(JSON.stringify(bad.error), /InvalidSignature/);

    const tx = createTransaction(
      relayer.accountId,
      relayer.key.getPublicKey(),
      payer.accountId,
      ak.nonce + 1n,
      [actionCreators.signedDelegate(sd)],
      new Uint8Array(32).fill(7),
    );
    const [, signed] = await new KeyPairSigner(relayer.key).signTransaction(tx);
    const unknown = await post(near.info.rpcUrl, "send_tx", {
      signed_tx_base64: Buffer.from(signed.encode()).toString("base64"),
      wait_until: "NONE",
    });
    assert.match(JSON.stringify(unknown.error), /InvalidChain/);
  });

  it("answers nearcore's errors for unknown accounts, keys and transactions", async () => {
    const account = await post(near.info.rpcUrl, "query", {
      request_type: "view_account",
      finality: "final",
      account_id: "nobody.near",
    });
    assert.equal(account.error?.cause?.name, "UNKNOWN_ACCOUNT");
    const key = await post(near.info.rpcUrl, "query", {
      request_type: "view_access_key",
      finality: "final",
      account_id: payer.accountId,
      public_key: KeyPair.fromRandom("ed25519").getPublicKey().toString(),
    });
    assert.equal(key.error?.cause?.name, "UNKNOWN_ACCESS_KEY");
    const tx = await post(near.info.rpcUrl, "tx", {
      tx_hash: "11111111111111111111111111111111",
      sender_account_id: relayer.accountId,
      wait_until: "NONE",
    });
    assert.equal(tx.error?.cause?.name, "UNKNOWN_TRANSACTION");
    const storage = await post(near.info.rpcUrl, "query", {
      request_type: "call_function",
      finality: "final",
      account_id: near.info.assets.USDC,
      method_name: "storage_balance_of",
      args_base64: Buffer.from(JSON.stringify({ account_id: "stranger.near" })).toString("base64"),
    });
    assert.equal(Buffer.from(storage.result.result).toString(), "null");
  });
  it("a fresh start is another chain: status names a different genesis hash", async () => {
    const other = await startNearLedger({ blockMs: 60_000 });
    try {
      const a = await post(near.info.rpcUrl, "status", []);
      const b = await post(other.info.rpcUrl, "status", []);
      assert.match(String(a.result.genesis_hash), /^[1-9A-HJ-NP-Za-km-z]{43,44}$/);
      assert.notEqual(a.result.genesis_hash, b.result.genesis_hash);
    } finally {
      await other.stop();
    }
  });
});
