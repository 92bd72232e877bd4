import { test } from "node:test";
import assert from "node:assert/strict";
import secp256k1 from "secp256k1";
import { decode, encode, verifySignature, Wallet, type Payment } from "xrpl";
import { nativeAccepts, signatureVerifies } from "./signature.js";

const ED25519 = "ed25519" as never;
const SECP256K1 = "ecdsa-secp256k1" as never;
/** secp256k1's group order: s and n - s are the two forms of one signature. */
const N = BigInt("0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141");

function signedBy(wallet: Wallet, sequence = 7): { tx: Record<string, unknown>; blob: string } {
  const payment = {
    TransactionType: "Payment",
    Account: wallet.classicAddress,
    Destination: Wallet.generate().classicAddress,
    Amount: "1000",
    Fee: "12",
    Sequence: sequence,
    LastLedgerSequence: 100,
  } as Payment;
  const blob = wallet.sign(payment).tx_blob;
  return { tx: decode(blob), blob };
}

/** The same transaction with another TxnSignature, re-encoded as a blob. */
function withSignature(tx: Record<string, unknown>, signature: string) {
  const changed = { ...tx, TxnSignature: signature };
  return { tx: changed, blob: encode(changed as never) };
}

const asDecoded = (tx: Record<string, unknown>) =>
  tx as unknown as Parameters<typeof signatureVerifies>[0];

test("secp256k1: a payer's signature is accepted by the native check, as the library accepts it", () => {
  for (let i = 0; i < 5; i++) {
    const { tx, blob } = signedBy(Wallet.generate(SECP256K1), i + 1);
    assert.equal(verifySignature(blob), true);
    assert.equal(nativeAccepts(asDecoded(tx)), true, "the native path decided it");
    assert.equal(signatureVerifies(asDecoded(tx), blob), true);
  }
});

test("Ed25519: a payer's signature is left to the library, which accepts it", () => {
  for (let i = 0; i < 5; i++) {
    const { tx, blob } = signedBy(Wallet.generate(ED25519), i + 1);
    assert.equal(nativeAccepts(asDecoded(tx)), false, "never decided natively");
    assert.equal(signatureVerifies(asDecoded(tx), blob), true);
  }
});

test("Ed25519: the identity key's forgery (R the identity, S zero), which OpenSSL accepts, is refused", () => {
  const forgery = `01${"00".repeat(31)}${"00".repeat(32)}`.toUpperCase();
  // The identity point, encoded canonically and as y = p + 1.
  for (const point of [`01${"00".repeat(31)}`, `EE${"FF".repeat(30)}7F`]) {
    const { tx } = signedBy(Wallet.generate(ED25519));
    const forged = { ...tx, SigningPubKey: `ED${point}`, TxnSignature: forgery };
    const blob = encode(forged as never);
    assert.equal(verifySignature(blob), false);
    assert.equal(nativeAccepts(asDecoded(forged)), false);
    assert.equal(signatureVerifies(asDecoded(forged), blob), false);
  }
});

for (const [name, algorithm] of [
  ["Ed25519", ED25519],
  ["secp256k1", SECP256K1],
] as const) {
  test(`${name}: a signature over other fields, or by another key, is refused`, () => {
    const wallet = Wallet.generate(algorithm);
    const { tx } = signedBy(wallet, 1);
    // The signature of sequence 1 on the payment of sequence 2.
    const other = signedBy(wallet, 2);
    const moved = withSignature(other.tx, tx["TxnSignature"] as string);
    assert.equal(nativeAccepts(asDecoded(moved.tx)), false);
    assert.equal(signatureVerifies(asDecoded(moved.tx), moved.blob), false);
    assert.equal(verifySignature(moved.blob), false);
    // Another key's signature over the same fields.
    const stranger = Wallet.generate(algorithm);
    const forged = { ...other.tx, SigningPubKey: stranger.publicKey };
    const forgedBlob = encode(forged as never);
    assert.equal(signatureVerifies(asDecoded(forged), forgedBlob), false);
  });
}

test("secp256k1: the high-S twin of a valid signature is refused, as the library refuses it", () => {
  const { tx } = signedBy(Wallet.generate(SECP256K1));
  const compact = secp256k1.signatureImport(Buffer.from(tx["TxnSignature"] as string, "hex"));
  const s = BigInt(`0x${Buffer.from(compact.subarray(32)).toString("hex")}`);
  const high = Buffer.from((N - s).toString(16).padStart(64, "0"), "hex");
  const twin = Buffer.from(
    secp256k1.signatureExport(Buffer.concat([Buffer.from(compact.subarray(0, 32)), high])),
  )
    .toString("hex")
    .toUpperCase();
  const { tx: malleated, blob } = withSignature(tx, twin);
  assert.equal(nativeAccepts(asDecoded(malleated)), false);
  assert.equal(verifySignature(blob), false);
  assert.equal(signatureVerifies(asDecoded(malleated), blob), false);
});

test("a signature the native check cannot read is left to the library, which refuses it", () => {
  const { tx } = signedBy(Wallet.generate(SECP256K1));
  const { tx: garbled, blob } = withSignature(tx, "3006020101020101");
  assert.equal(signatureVerifies(asDecoded(garbled), blob), false);
  const { tx: notDer, blob: notDerBlob } = withSignature(tx, "00".repeat(70));
  assert.equal(signatureVerifies(asDecoded(notDer), notDerBlob), false);
});

test("secp256k1: a non-canonical DER form of a valid signature is left to the library", () => {
  const { tx, blob } = signedBy(Wallet.generate(SECP256K1));
  const der = Buffer.from(tx["TxnSignature"] as string, "hex");
  // The same (r, s) with the sequence's length in long form (0x81 nn): not canonical DER.
  const longForm = Buffer.concat([Buffer.from([0x30, 0x81, der[1]!]), der.subarray(2)]);
  const { tx: reencoded, blob: reencodedBlob } = withSignature(
    tx,
    longForm.toString("hex").toUpperCase(),
  );
  // libsecp256k1 cannot parse it either: the native check does not accept it.
  assert.throws(() => nativeAccepts(asDecoded(reencoded)));
  // The library cannot parse that form, and refuses the payment.
  assert.throws(() => verifySignature(reencodedBlob));
  assert.equal(signatureVerifies(asDecoded(reencoded), reencodedBlob), false);
  // The canonical form still verifies natively.
  assert.equal(nativeAccepts(asDecoded(tx)), true);
  assert.equal(signatureVerifies(asDecoded(tx), blob), true);
});
