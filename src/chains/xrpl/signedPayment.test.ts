import { test } from "node:test";
import assert from "node:assert/strict";
import { encode, hashes, Wallet, type Payment } from "xrpl";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { RLUSD_CURRENCY, RLUSD_ISSUER } from "./networks.js";
import { checkSignedPayment, decodePayment, invoiceHash, paymentHash } from "./signedPayment.js";

const payTo = Wallet.generate().classicAddress;
const limits = { maxFeeDrops: 10_000n, networkId: 0 };
const rlusd = (value: string) => ({ currency: RLUSD_CURRENCY, issuer: RLUSD_ISSUER, value });
const requirements = (extra: Record<string, unknown> = {}): PaymentRequirements => ({
  scheme: "exact",
  network: "xrpl:0",
  asset: RLUSD_CURRENCY,
  amount: "1.25",
  payTo,
  maxTimeoutSeconds: 60,
  extra: { issuer: RLUSD_ISSUER, areFeesSponsored: false, ...extra },
});
const check = (wallet: Wallet, fields: Partial<Payment>, req = requirements()) => {
  const tx = {
    TransactionType: "Payment",
    Account: wallet.classicAddress,
    Destination: payTo,
    Amount: rlusd("1.25"),
    Fee: "12",
    Sequence: 7,
    LastLedgerSequence: 100,
    ...fields,
  } as Payment;
  const payload = {
    x402Version: 2,
    accepted: req,
    payload: { signedTxBlob: wallet.sign(tx).tx_blob },
  } as PaymentPayload;
  return checkSignedPayment(payload, req, limits);
};
const hex = (s: string) => Buffer.from(s, "utf8").toString("hex").toUpperCase();

test("the foundation client's shape: SendMax equal to the amount, InvoiceID the SHA-256 of the invoice", () => {
  const r = check(
    Wallet.generate(),
    { SendMax: rlusd("1.25"), InvoiceID: invoiceHash("inv-7") },
    requirements({ invoiceId: "inv-7" }),
  );
  assert.equal(r.ok, true, JSON.stringify(r));
});

test("the t54 SDK's shape: InvoiceID, a memo carrying the invoice, and a SourceTag; secp256k1 keys too", () => {
  const wallet = Wallet.generate("ecdsa-secp256k1" as never);
  const r = check(
    wallet,
    {
      InvoiceID: invoiceHash("inv-8"),
      Memos: [{ Memo: { MemoData: hex("inv-8") } }],
      SourceTag: 804681468,
    },
    requirements({ invoiceId: "inv-8" }),
  );
  assert.equal(r.ok, true, JSON.stringify(r));
});

test("an invoice bound by a memo alone is accepted; a memo or InvoiceID for another invoice is not", () => {
  const req = requirements({ invoiceId: "inv-9" });
  assert.equal(
    check(Wallet.generate(), { Memos: [{ Memo: { MemoData: hex("inv-9") } }] }, req).ok,
    true,
  );
  const otherMemo = check(
    Wallet.generate(),
    { Memos: [{ Memo: { MemoData: hex("inv-1") } }] },
    req,
  );
  assert.deepEqual(
    [otherMemo.ok, !otherMemo.ok && otherMemo.reason],
    [false, "invalid_exact_xrpl_invoice"],
  );
  const otherHash = check(Wallet.generate(), { InvoiceID: invoiceHash("inv-1") }, req);
  assert.deepEqual(
    [otherHash.ok, !otherHash.ok && otherHash.reason],
    [false, "invalid_exact_xrpl_invoice"],
  );
  const none = check(Wallet.generate(), {}, req);
  assert.deepEqual([none.ok, !none.ok && none.reason], [false, "invalid_exact_xrpl_invoice"]);
});

test("issued amounts compare as decimals: 1.250 is 1.25, 1.2500001 is not; SendMax below the amount is refused", () => {
  assert.equal(check(Wallet.generate(), { Amount: rlusd("1.250") }).ok, true);
  const more = check(Wallet.generate(), { Amount: rlusd("1.2500001") });
  assert.deepEqual([more.ok, !more.ok && more.reason], [false, "invalid_exact_xrpl_amount"]);
  const lowMax = check(Wallet.generate(), { SendMax: rlusd("1.2") });
  assert.deepEqual(
    [lowMax.ok, !lowMax.ok && lowMax.reason],
    [false, "invalid_exact_xrpl_partial_payment"],
  );
  const otherIssuer = check(Wallet.generate(), {
    Amount: { currency: RLUSD_CURRENCY, issuer: Wallet.generate().classicAddress, value: "1.25" },
  });
  assert.deepEqual(
    [otherIssuer.ok, !otherIssuer.ok && otherIssuer.reason],
    [false, "invalid_exact_xrpl_asset"],
  );
});

test("a transaction that is not a Payment, or carries a Delegate, or no LastLedgerSequence, is refused by name", () => {
  const w = Wallet.generate();
  const noLast = check(w, { LastLedgerSequence: undefined });
  assert.deepEqual(
    [noLast.ok, !noLast.ok && noLast.reason],
    [false, "invalid_exact_xrpl_last_ledger_sequence"],
  );
  const delegated = check(w, { Delegate: Wallet.generate().classicAddress } as Partial<Payment>);
  assert.deepEqual(
    [delegated.ok, !delegated.ok && delegated.reason],
    [false, "invalid_exact_xrpl_delegate"],
  );
});

test("a payment's hash is the xrpl package's transaction id, computed once for every copy of it", () => {
  for (const algorithm of ["ed25519", "ecdsa-secp256k1"] as never[]) {
    const wallet = Wallet.generate(algorithm);
    const blob = wallet.sign({
      TransactionType: "Payment",
      Account: wallet.classicAddress,
      Destination: payTo,
      Amount: rlusd("1.25"),
      Fee: "12",
      Sequence: 9,
      LastLedgerSequence: 100,
    } as Payment).tx_blob;
    const copy = () =>
      ({
        x402Version: 2,
        accepted: requirements(),
        payload: { signedTxBlob: blob },
      }) as PaymentPayload;
    assert.equal(paymentHash(copy()), hashes.hashSignedTx(blob));
    // Lower-case hex is the same payment.
    const lower = {
      x402Version: 2,
      accepted: requirements(),
      payload: { signedTxBlob: blob.toLowerCase() },
    } as PaymentPayload;
    assert.equal(paymentHash(lower), hashes.hashSignedTx(blob));
    // Two copies of one payload share one decoded transaction.
    assert.equal(decodePayment(copy()), decodePayment(copy()));
  }
});

test("a transaction that carries no signature of any kind has no hash, as hashSignedTx refuses it", () => {
  const wallet = Wallet.generate();
  const blob = encode({
    TransactionType: "Payment",
    Account: wallet.classicAddress,
    Destination: payTo,
    Amount: "1000",
    Fee: "12",
    Sequence: 3,
  } as never);
  assert.equal(
    paymentHash({
      x402Version: 2,
      accepted: requirements(),
      payload: { signedTxBlob: blob },
    } as PaymentPayload),
    undefined,
  );
});
