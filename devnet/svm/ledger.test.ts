/**
 * The local Solana ledger refuses what a validator refuses and answers as a
 * validator answers: an unknown blockhash, a bad signature, a method it does
 * not serve; a landed transaction sent again is answered with its signature
 * and not executed twice; statuses go processed → confirmed → finalized.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  appendTransactionMessageInstructions,
  createKeyPairSignerFromBytes,
  createSolanaRpc,
  createTransactionMessage,
  getBase58Encoder,
  getBase64EncodedWireTransaction,
  pipe,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
  type Blockhash,
  type KeyPairSigner,
} from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";
import { startSolanaLedger, type RunningSolana } from "./index.js";
import type { SolanaLedger } from "./ledger.js";

describe("the local Solana ledger", () => {
  let devnet: RunningSolana & { ledger: SolanaLedger };
  let payer: KeyPairSigner;
  let rpc: ReturnType<typeof createSolanaRpc>;

  before(async () => {
    devnet = await startSolanaLedger({ slotMs: 60_000 }); // slots advance only when told
    payer = await createKeyPairSignerFromBytes(
      getBase58Encoder().encode(devnet.info.payerSecretKeys[0]!),
    );
    rpc = createSolanaRpc(devnet.info.rpcUrl);
  });
  after(() => devnet.stop());

  const transfer = async (lamports: bigint, blockhash?: string) => {
    const latest = devnet.ledger.latestBlockhash();
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(payer, m),
      (m) =>
        setTransactionMessageLifetimeUsingBlockhash(
          {
            blockhash: (blockhash ?? latest.blockhash) as Blockhash,
            lastValidBlockHeight: latest.lastValidBlockHeight,
          },
          m,
        ),
      (m) =>
        appendTransactionMessageInstructions(
          [
            getTransferSolInstruction({
              source: payer,
              destination: devnet.info.payTo as never,
              amount: lamports,
            }),
          ],
          m,
        ),
    );
    return getBase64EncodedWireTransaction(await signTransactionMessageWithSigners(message));
  };
  const send = (wire: string) =>
    rpc.sendTransaction(wire as never, { encoding: "base64", skipPreflight: true }).send();
  const balance = async () => (await rpc.getBalance(devnet.info.payTo as never).send()).value;

  test("a transaction executes once; sent again it answers its signature and moves nothing", async () => {
    const before = await balance();
    const wire = await transfer(10_000_000n);
    const signature = await send(wire);
    assert.equal(await balance(), before + 10_000_000n);
    assert.equal(await send(wire), signature);
    assert.equal(await balance(), before + 10_000_000n, "not executed twice");
  });

  test("statuses go processed, then confirmed one slot later, then finalized", async () => {
    const signature = await send(await transfer(1n));
    const status = async () =>
      (await rpc.getSignatureStatuses([signature]).send()).value[0]?.confirmationStatus;
    assert.equal(await status(), "processed");
    devnet.ledger.advance();
    assert.equal(await status(), "confirmed");
    for (let i = 0; i < 32; i++) devnet.ledger.advance();
    assert.equal(await status(), "finalized");
  });

  test("an unknown blockhash is refused, and a blockhash expires after 150 blocks", async () => {
    const before = await balance();
    const notFound = (e: unknown) => /Blockhash not found/.test(String((e as Error).cause ?? e));
    await assert.rejects(
      send(await transfer(5n, "4uQeVj5tqViQh7yWWGStvkEG1Zmhx6uasJtWCJziofM")),
      notFound,
    );
    const old = devnet.ledger.latestBlockhash().blockhash;
    for (let i = 0; i < 151; i++) devnet.ledger.advance();
    assert.equal(devnet.ledger.isBlockhashValid(old), false);
    await assert.rejects(send(await transfer(6n, old)), notFound);
    assert.equal(await balance(), before, "nothing moved");
  });

  test("a tampered signature is refused before execution", async () => {
    const before = await balance();
    const wire = Buffer.from(await transfer(7n), "base64");
    wire[5] = wire[5]! ^ 0xff;
    await assert.rejects(send(wire.toString("base64")), (e: unknown) =>
      /signature verification|SignatureFailure/.test(String((e as Error).cause ?? e)),
    );
    assert.equal(await balance(), before);
  });

  test("dropping refused transactions silently, as a node with skipPreflight: the signature comes back and is never found", async () => {
    devnet.ledger.dropRefusedSilently = true;
    try {
      const wire = Buffer.from(await transfer(8n), "base64");
      wire[6] = wire[6]! ^ 0xff;
      const signature = await send(wire.toString("base64"));
      devnet.ledger.advance();
      const status = (await rpc.getSignatureStatuses([signature]).send()).value[0];
      assert.equal(status, null, "never landed");
    } finally {
      devnet.ledger.dropRefusedSilently = false;
    }
  });

  test("a method it does not serve is JSON-RPC error -32601", async () => {
    const res = await fetch(devnet.info.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "getBlockProduction", params: [] }),
    });
    const body = (await res.json()) as { error: { code: number } };
    assert.equal(body.error.code, -32601);
  });
});
