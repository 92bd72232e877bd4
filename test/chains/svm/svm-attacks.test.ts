/**
 * Solana payments built by hand (with kit and the SPL program clients, as an
 * attacker would) against the local ledger: each is refused with its reason
 * and nothing moves. The fee payer is never the transfer's authority or
 * source, a transaction must carry exactly the expected instructions, an
 * expired blockhash or an underfunded payer is refused, and a tampered
 * signature never settles.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { x402Facilitator } from "@x402/core/facilitator";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  address,
  appendTransactionMessageInstructions,
  createKeyPairSignerFromBytes,
  createNoopSigner,
  createTransactionMessage,
  getBase58Encoder,
  getBase64EncodedWireTransaction,
  partiallySignTransactionMessageWithSigners,
  pipe,
  setTransactionMessageFeePayer,
  setTransactionMessageLifetimeUsingBlockhash,
  type Address,
  type Blockhash,
  type Instruction,
  type KeyPairSigner,
} from "@solana/kit";
import {
  getSetComputeUnitLimitInstruction,
  getSetComputeUnitPriceInstruction,
} from "@solana-program/compute-budget";
import { getTokenDecoder, getTransferCheckedInstruction } from "@solana-program/token";
import {
  startSolanaLedger,
  associatedTokenAccount,
  USDC_MINT,
  type RunningSolana,
} from "../../../devnet/svm/index.js";
import { createTokenAccount } from "../../../devnet/svm/setup.js";
import type { SolanaLedger } from "../../../devnet/svm/ledger.js";
import type { SvmChainAdapter } from "../../../src/chains/svm/index.js";
import { SOLANA_NETWORK as NETWORK, testSvmFamily } from "./family.js";

describe("hand-built Solana payments an attacker would try", () => {
  let devnet: RunningSolana & { ledger: SolanaLedger };
  let family: SvmChainAdapter;
  let engine: x402Facilitator;
  let feePayer: Address;
  let payer: KeyPairSigner;

  before(async () => {
    devnet = await startSolanaLedger({ slotMs: 100 });
    family = await testSvmFamily({
      rpcUrl: devnet.info.rpcUrl,
      secretKeys: devnet.info.facilitatorSecretKeys.slice(0, 1),
    });
    engine = new x402Facilitator();
    family.register(engine);
    feePayer = engine.getSupported().kinds.find((k) => k.network === NETWORK)!.extra![
      "feePayer"
    ] as Address;
    // The fee payer holds USDC of its own: the prize an attacker is after.
    await createTokenAccount(devnet.ledger, feePayer, 5_000_000n);
    payer = await createKeyPairSignerFromBytes(
      getBase58Encoder().encode(devnet.info.payerSecretKeys[0]!),
    );
  });
  after(async () => {
    await family.close();
    await devnet.stop();
  });

  const usdcOf = async (owner: Address) => {
    const acc = devnet.ledger.account(await associatedTokenAccount(owner));
    return acc.exists ? getTokenDecoder().decode(acc.data).amount : -1n;
  };
  const requirements = (amount = "1000"): PaymentRequirements =>
    ({
      scheme: "exact",
      network: NETWORK,
      asset: USDC_MINT,
      amount,
      payTo: devnet.info.payTo,
      maxTimeoutSeconds: 60,
      extra: { feePayer },
    }) as PaymentRequirements;

  /** A payment transaction as the official client lays it out, with any instructions. */
  const build = async (instructions: Instruction[], blockhash?: string) => {
    const latest = devnet.ledger.latestBlockhash();
    const message = pipe(
      createTransactionMessage({ version: 0 }),
      (m) => setTransactionMessageFeePayer(feePayer, m),
      (m) =>
        setTransactionMessageLifetimeUsingBlockhash(
          {
            blockhash: (blockhash ?? latest.blockhash) as Blockhash,
            lastValidBlockHeight: latest.lastValidBlockHeight,
          },
          m,
        ),
      (m) => appendTransactionMessageInstructions(instructions, m),
    );
    const signed = await partiallySignTransactionMessageWithSigners(message);
    const req = requirements();
    return {
      payload: {
        x402Version: 2,
        accepted: req,
        payload: { transaction: getBase64EncodedWireTransaction(signed) },
      } as PaymentPayload,
      req,
    };
  };
  const budget = () => [
    getSetComputeUnitLimitInstruction({ units: 20_000 }),
    getSetComputeUnitPriceInstruction({ microLamports: 1 }),
  ];
  const transfer = async (from: Address, authority: KeyPairSigner | Address, amount = 1000n) =>
    getTransferCheckedInstruction({
      source: await associatedTokenAccount(from),
      mint: USDC_MINT,
      destination: await associatedTokenAccount(address(devnet.info.payTo)),
      authority: typeof authority === "string" ? createNoopSigner(authority) : authority,
      amount,
      decimals: 6,
    });
  const refused = async (payload: PaymentPayload, req: PaymentRequirements, reason: RegExp) => {
    const before = await usdcOf(address(devnet.info.payTo));
    const verified = await engine.verify(payload, req);
    assert.equal(verified.isValid, false, JSON.stringify(verified));
    assert.match(String(verified.invalidReason), reason);
    const settled = await engine.settle(payload, req);
    assert.equal(settled.success, false);
    assert.equal(await usdcOf(address(devnet.info.payTo)), before, "nothing moved");
  };

  test("the fee payer as the transfer's authority and source: refused, its USDC stays", async () => {
    const before = await usdcOf(feePayer);
    const { payload, req } = await build([...budget(), await transfer(feePayer, feePayer)]);
    await refused(payload, req, /fee_payer_transferring_funds|fee_payer/);
    assert.equal(await usdcOf(feePayer), before);
  });

  test("a missing transfer, and an extra instruction, are refused", async () => {
    const none = await build(budget());
    await refused(none.payload, none.req, /instructions_length|no_transfer/);
    const extra = await build([
      ...budget(),
      await transfer(payer.address, payer),
      await transfer(payer.address, payer, 1n),
    ]);
    await refused(extra.payload, extra.req, /instruction/);
  });

  test("a blockhash outside the window is refused", async () => {
    const { payload, req } = await build(
      [...budget(), await transfer(payer.address, payer)],
      "4uQeVj5tqViQh7yWWGStvkEG1Zmhx6uasJtWCJziofM",
    );
    await refused(payload, req, /simulation|blockhash/);
  });

  test("a payer without the funds is refused", async () => {
    const poor = await createKeyPairSignerFromBytes(
      getBase58Encoder().encode(devnet.info.payerSecretKeys[4]!),
    );
    const { payload, req } = await build([
      ...budget(),
      await transfer(poor.address, poor, 10n ** 18n),
    ]);
    await refused(payload, { ...req, amount: (10n ** 18n).toString() }, /simulation|insufficient/);
  });

  test("a tampered payer signature never settles", async () => {
    const { payload, req } = await build([...budget(), await transfer(payer.address, payer)]);
    const wire = Buffer.from((payload.payload as { transaction: string }).transaction, "base64");
    // Flip a byte of the payer's signature (the second of two).
    const at = 1 + 64 + 10;
    wire[at] = wire[at]! ^ 0xff;
    const tampered = {
      ...payload,
      payload: { transaction: wire.toString("base64") },
    } as PaymentPayload;
    await refused(tampered, req, /signature|simulation/);
  });
});
