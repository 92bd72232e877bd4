/**
 * The local Solana ledger answers what other clients send, not only what
 * this service sends: `@solana/kit` (the chain's official client library)
 * and its program clients, the official x402 facilitator signer's reads,
 * and raw JSON-RPC as Solana takes it (positional parameters only, a
 * configuration object last). Before, account data came back in base64
 * whatever encoding was asked (`jsonParsed` token balances, the legacy
 * base58 default), `getTransaction` answered the message alone in base64
 * instead of a `json` transaction, and a map of parameters ran as if none
 * had been given.
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
  type Address,
  type KeyPairSigner,
} from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";
import { TOKEN_PROGRAM_ADDRESS, fetchToken, findAssociatedTokenPda } from "@solana-program/token";
import { toFacilitatorSvmSigner } from "@x402/svm";
import { SOLANA_MAINNET, startSolanaLedger, type RunningSolana } from "./index.js";
import type { SolanaLedger } from "./ledger.js";

describe("the local Solana ledger and third-party clients", () => {
  let devnet: RunningSolana & { ledger: SolanaLedger };
  let payer: KeyPairSigner;
  let rpc: ReturnType<typeof createSolanaRpc>;
  let ata: Address;

  before(async () => {
    devnet = await startSolanaLedger({ slotMs: 100 });
    payer = await createKeyPairSignerFromBytes(
      getBase58Encoder().encode(devnet.info.payerSecretKeys[0]!),
    );
    rpc = createSolanaRpc(devnet.info.rpcUrl);
    [ata] = await findAssociatedTokenPda({
      owner: payer.address,
      mint: devnet.info.assets.USDC as Address,
      tokenProgram: TOKEN_PROGRAM_ADDRESS,
    });
  });
  after(() => devnet.stop());

  const raw = async (method: string, params?: unknown) => {
    const res = await fetch(devnet.info.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, ...(params ? { params } : {}) }),
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- RPC answers are read field by field
    return (await res.json()) as { result?: any; error?: { code: number; message: string } };
  };

  /** A SOL transfer from the payer (above rent exemption), built and signed as @solana/kit does. */
  async function transferSol(lamports: bigint) {
    const { value: latest } = await rpc.getLatestBlockhash().send();
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayerSigner(payer, m),
      (m) => setTransactionMessageLifetimeUsingBlockhash(latest, m),
      (m) =>
        appendTransactionMessageInstructions(
          [
            getTransferSolInstruction({
              source: payer,
              destination: devnet.info.payTo as Address,
              amount: lamports,
            }),
          ],
          m,
        ),
    );
    return getBase64EncodedWireTransaction(await signTransactionMessageWithSigners(message));
  }

  test("@solana/kit: cluster reads, accounts in each encoding, the token program's client, a transfer and its transaction", async () => {
    assert.equal(await rpc.getHealth().send(), "ok");
    assert.ok((await rpc.getVersion().send())["solana-core"]);
    assert.equal(typeof (await rpc.getGenesisHash().send()), "string");
    assert.ok((await rpc.getSlot().send()) >= 0n);
    assert.ok((await rpc.getEpochInfo().send()).absoluteSlot >= 0n);
    const { value: latest } = await rpc.getLatestBlockhash().send();
    assert.equal((await rpc.isBlockhashValid(latest.blockhash).send()).value, true);
    assert.ok((await rpc.getMinimumBalanceForRentExemption(165n).send()) > 0n);

    const token = await fetchToken(rpc, ata);
    assert.equal(token.data.owner, payer.address);
    const { value: balance } = await rpc.getTokenAccountBalance(ata).send();
    assert.equal(balance.amount, token.data.amount.toString());
    const parsed = await rpc.getAccountInfo(ata, { encoding: "jsonParsed" }).send();
    const data = parsed.value!.data as {
      program: string;
      parsed: { type: string; info: { mint: string; tokenAmount: { amount: string } } };
    };
    assert.equal(data.program, "spl-token");
    assert.equal(data.parsed.type, "account");
    assert.equal(data.parsed.info.tokenAmount.amount, balance.amount);
    const mint = await rpc
      .getAccountInfo(devnet.info.assets.USDC as Address, { encoding: "jsonParsed" })
      .send();
    assert.equal(
      (mint.value!.data as { parsed: { info: { decimals: number } } }).parsed.info.decimals,
      6,
    );
    const plain = await rpc.getAccountInfo(payer.address).send();
    assert.equal(plain.value!.data, "", "the default encoding is base58 as a plain string");
    const many = await rpc.getMultipleAccounts([ata, payer.address], { encoding: "base64" }).send();
    assert.equal(many.value.length, 2);

    const before = (await rpc.getBalance(devnet.info.payTo as Address).send()).value;
    const signature = await rpc
      .sendTransaction((await transferSol(10_000_000n)) as never, { encoding: "base64" })
      .send();
    const status = (await rpc.getSignatureStatuses([signature]).send()).value[0];
    assert.equal(status?.err, null);
    assert.equal(
      (await rpc.getBalance(devnet.info.payTo as Address).send()).value,
      before + 10_000_000n,
    );
    const tx = await rpc
      .getTransaction(signature, { maxSupportedTransactionVersion: 0, encoding: "json" })
      .send();
    assert.equal(tx?.version, 0);
    assert.equal(tx?.meta?.err, null);
    assert.equal(tx?.transaction.signatures[0], signature);
    assert.equal(tx?.transaction.message.accountKeys[0], payer.address);
    const wire = await rpc
      .getTransaction(signature, { maxSupportedTransactionVersion: 0, encoding: "base64" })
      .send();
    assert.equal(wire?.transaction[1], "base64");
  });

  test("the official x402 facilitator signer's reads: token balance, account, a transaction's inner instructions", async () => {
    const signer = toFacilitatorSvmSigner(payer, { defaultRpcUrl: devnet.info.rpcUrl });
    const balance = await signer.getTokenAccountBalance!(ata, SOLANA_MAINNET);
    assert.equal(balance, (await fetchToken(rpc, ata)).data.amount);
    assert.ok(await signer.getAccountInfo!(ata, SOLANA_MAINNET));
    const signature = await rpc
      .sendTransaction((await transferSol(10_000_000n)) as never, { encoding: "base64" })
      .send();
    assert.equal((await rpc.getSignatureStatuses([signature]).send()).value[0]?.err, null);
    const inner = await signer.getConfirmedTransactionInnerInstructions!(signature, SOLANA_MAINNET);
    assert.deepEqual(inner, { innerInstructions: [] });
  });

  test("raw JSON-RPC: positional parameters with a trailing configuration; a map of parameters is -32602", async () => {
    const a = await raw("getBalance", [payer.address]);
    const b = await raw("getBalance", [payer.address, { commitment: "confirmed" }]);
    assert.equal(typeof a.result.value, "number");
    assert.equal(b.result.value, a.result.value);
    const b58 = await raw("getAccountInfo", [payer.address, { encoding: "base58" }]);
    assert.deepEqual(b58.result.value.data, ["", "base58"]);
    const tooLong = await raw("getAccountInfo", [ata]);
    assert.equal(tooLong.error?.code, -32600, "165 bytes do not fit the base58 default");
    const asMap = await raw("getBalance", { pubkey: payer.address });
    assert.equal(asMap.error?.code, -32602);
    assert.equal((await raw("getSlot")).error, undefined, "no params at all is no parameters");
  });
});
