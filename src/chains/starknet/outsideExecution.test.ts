import { test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { typedData, type TypedData } from "starknet";
import { outsideExecutionFor } from "./clients/exactClient.js";
import { STARKNET_USDC } from "./networks.js";
import { holdsExpectedTransfer } from "./exactScheme.js";
import {
  ANY_CALLER,
  TRANSFER_EVENT_KEY,
  checkOutsideExecution,
  parseOutsideExecution,
  signedMessageHash,
  type CheckSettings,
} from "./outsideExecution.js";

const PAYER = "0x3404f710a7a221bb28241ecc4129c30fb1926a723b3f4d177b94eb949da977e";
const EXECUTOR = "0x585a88ab5fa949e14cee0f397ca501713aed6aaf975d351db7c8f4d6652173a";
const PAY_TO = "0x66c63a8ef76f763c1c7f05da6533588239e93cf8d2b51dafac9caea801f22c";
const NOW = 1_800_000_000;

const requirements = (fields: Partial<PaymentRequirements> = {}): PaymentRequirements => ({
  scheme: "exact",
  network: "starknet:SN_MAIN",
  asset: STARKNET_USDC,
  amount: "10000",
  payTo: PAY_TO,
  maxTimeoutSeconds: 120,
  extra: { feePayer: EXECUTOR },
  ...fields,
});
const settings: CheckSettings = {
  chainId: "0x534e5f4d41494e",
  executors: new Set([BigInt(EXECUTOR)]),
  skewSeconds: 30,
  nowSeconds: NOW,
};
/** A payload as the client builds it (the signature is not checked offline). */
const payload = (
  req = requirements(),
  edit: (td: TypedData) => TypedData = (td) => td,
  body: Record<string, unknown> = {},
): PaymentPayload =>
  ({
    x402Version: 2,
    accepted: req,
    payload: {
      from: PAYER,
      outsideExecution: {
        typedData: edit(outsideExecutionFor(PAYER, req, { nonce: "0x1234", nowSeconds: NOW })),
        signature: ["0x1", "0x2"],
      },
      ...body,
    },
  }) as PaymentPayload;
const reasonOf = (p: PaymentPayload, req = requirements()) => {
  const out = checkOutsideExecution(p, req, settings);
  return out.ok ? "ok" : out.reason;
};
const msg = (td: TypedData) => td.message as Record<string, unknown>;
const call0 = (td: TypedData) =>
  (msg(td)["Calls"] as { Calldata: string[]; Selector: string }[])[0]!;

test("a payload built as the client builds it passes, its payer padded and its typed data canonical", () => {
  const out = checkOutsideExecution(payload(), requirements(), settings);
  assert.ok(out.ok);
  assert.equal(out.payer, `0x0${PAYER.slice(2)}`);
  assert.equal(out.oe.nonce, 0x1234n);
  assert.equal(out.oe.typedData.domain.chainId, "0x534e5f4d41494e");
});

test("the signed hash is starknet.js's SNIP-12 message hash of the canonical typed data, on every chain (its domain hashed once per chain)", () => {
  for (const chainId of ["0x534e5f4d41494e", "0x534e5f5345504f4c4941", "0x534e5f4d41494e"]) {
    const p = payload(requirements(), (td) => ({ ...td, domain: { ...td.domain, chainId } }));
    const parsed = parseOutsideExecution(p);
    assert.ok(parsed.ok);
    const out = checkOutsideExecution(p, requirements(), { ...settings, chainId });
    assert.ok(out.ok);
    assert.equal(
      signedMessageHash(p, parsed.oe),
      typedData.getMessageHash(out.oe.typedData, out.payer),
      chainId,
    );
  }
});

test("felts spelled differently (padding, decimal, chain id as a short string) are the same payment", () => {
  const p = payload(requirements(), (td) => {
    msg(td)["Nonce"] = "0x" + "0".repeat(60) + "1234";
    msg(td)["Execute After"] = "1";
    return { ...td, domain: { ...td.domain, chainId: "SN_MAIN" } };
  });
  assert.equal(reasonOf(p), "ok");
});

test("each offline negative has its own reason", () => {
  const cases: [string, PaymentPayload, PaymentRequirements?][] = [
    ["invalid_exact_starknet_fee_payer", payload(), requirements({ extra: {} })],
    [
      "invalid_exact_starknet_fee_payer",
      payload(),
      requirements({ extra: { feePayer: `0x${ANY_CALLER.toString(16)}` } }),
    ],
    ["invalid_exact_starknet_fee_payer", payload(), requirements({ extra: { feePayer: PAYER } })],
    ["invalid_exact_starknet_fee_payer", payload(), requirements({ extra: { feePayer: PAY_TO } })],
    [
      "invalid_exact_starknet_payload_caller",
      payload(requirements(), (td) => ((msg(td)["Caller"] = PAY_TO), td)),
    ],
    [
      "invalid_exact_starknet_payload_calls",
      payload(requirements(), (td) => ((msg(td)["Calls"] = []), td)),
    ],
    [
      "invalid_exact_starknet_payload_calls",
      payload(requirements(), (td) => ((call0(td).Selector = "0x1"), td)),
    ],
    [
      "invalid_exact_starknet_payload_amount_mismatch",
      payload(requirements(), (td) => ((call0(td).Calldata[2] = "0x1"), td)),
    ],
    [
      "invalid_exact_starknet_payload_amount_mismatch",
      payload(
        requirements(),
        (td) => ((call0(td).Calldata[1] = `0x${(1n << 128n).toString(16)}`), td),
      ),
    ],
    [
      "invalid_exact_starknet_payload_recipient_mismatch",
      payload(requirements({ payTo: EXECUTOR })),
    ],
    ["invalid_exact_starknet_payload_asset_mismatch", payload(requirements({ asset: PAY_TO }))],
    [
      "invalid_exact_starknet_payload_execute_after",
      payload(requirements(), (td) => ((msg(td)["Execute After"] = String(NOW - 10)), td)),
    ],
    [
      "invalid_exact_starknet_payload_expired",
      payload(requirements(), (td) => ((msg(td)["Execute Before"] = String(NOW + 30)), td)),
    ],
    [
      "invalid_exact_starknet_payload_window_exceeds_max_timeout",
      payload(requirements({ maxTimeoutSeconds: 600 })),
    ],
    [
      "invalid_exact_starknet_payload_chain_id",
      payload(requirements(), (td) => ({ ...td, domain: { ...td.domain, chainId: "SN_SEPOLIA" } })),
    ],
    [
      "invalid_exact_starknet_payload_typed_data",
      payload(requirements(), (td) => ({ ...td, domain: { ...td.domain, version: "1" } })),
    ],
    [
      "invalid_exact_starknet_payload_typed_data",
      payload(requirements(), (td) => ((msg(td)["Extra"] = "0x1"), td)),
    ],
    [
      "invalid_exact_starknet_payload_typed_data",
      payload(requirements(), (td) => ({ ...td, primaryType: "Call" })),
    ],
    ["invalid_exact_starknet_payload", payload(requirements(), undefined, { from: "payer" })],
    [
      "invalid_exact_starknet_payload",
      payload(requirements(), undefined, {
        outsideExecution: { typedData: {}, signature: Array(33).fill("0x1") },
      }),
    ],
    ["invalid_payment_requirements", payload(), requirements({ amount: "0x10" })],
  ];
  for (const [reason, p, req] of cases) assert.equal(reasonOf(p, req), reason, reason);
});

test("a malformed payload names its first bad field", () => {
  const out = parseOutsideExecution({
    x402Version: 2,
    payload: {
      from: PAYER,
      outsideExecution: { typedData: { domain: {}, message: {} }, signature: ["0x1"] },
    },
  } as unknown as PaymentPayload);
  assert.equal(out.ok, false);
  assert.match(!out.ok ? out.message : "", /chainId/);
});

test("the expected Transfer: keyed and legacy layouts count, others' transfers do not, two from the payer fail", () => {
  const want = { asset: 0xaan, from: 0x1n, to: 0x2n, amount: 5n };
  const key = `0x${TRANSFER_EVENT_KEY.toString(16)}`;
  const keyed = { from_address: "0xaa", keys: [key, "0x1", "0x2"], data: ["0x5", "0x0"] };
  const legacy = { from_address: "0xaa", keys: [key], data: ["0x1", "0x2", "0x5", "0x0"] };
  const fee = { from_address: "0xaa", keys: [key, "0x9", "0x8"], data: ["0x99", "0x0"] };
  const elsewhere = { ...keyed, from_address: "0xbb" };
  assert.deepEqual(holdsExpectedTransfer([keyed, fee], want), { ok: true });
  assert.deepEqual(holdsExpectedTransfer([legacy], want), { ok: true });
  assert.equal(holdsExpectedTransfer([elsewhere], want).ok, false);
  assert.equal(holdsExpectedTransfer([keyed, legacy], want).ok, false);
  assert.equal(holdsExpectedTransfer([{ ...keyed, data: ["0x4", "0x0"] }], want).ok, false);
  assert.equal(holdsExpectedTransfer([{ ...keyed, data: ["0x5"] }], want).ok, false);
});

test("extra.feePayer and extra.caller (with areFeesSponsored) bind the same executor, in either direction", () => {
  const feePayerForm = requirements({ extra: { feePayer: EXECUTOR } });
  const callerForm = requirements({ extra: { caller: EXECUTOR, areFeesSponsored: true } });
  const callerOnly = requirements({ extra: { caller: EXECUTOR } });
  const both = requirements({
    extra: { feePayer: EXECUTOR, caller: EXECUTOR, areFeesSponsored: true },
  });
  for (const signedFor of [feePayerForm, callerForm, both]) {
    for (const settledUnder of [feePayerForm, callerForm, callerOnly, both]) {
      assert.equal(
        reasonOf(payload(signedFor), settledUnder),
        "ok",
        `${JSON.stringify(signedFor.extra)} under ${JSON.stringify(settledUnder.extra)}`,
      );
    }
  }
});

test("an unsponsored or foreign caller is refused with a reason that names it", () => {
  const check = (extra: Record<string, unknown>) => {
    const out = checkOutsideExecution(payload(), requirements({ extra }), settings);
    return out.ok ? { reason: "ok", message: "" } : out;
  };
  const unsponsored = check({ caller: EXECUTOR, areFeesSponsored: false });
  assert.equal(unsponsored.reason, "invalid_payment_requirements");
  assert.match(unsponsored.message, /areFeesSponsored must be true/);
  assert.equal(
    check({ feePayer: EXECUTOR, areFeesSponsored: false }).reason,
    "invalid_payment_requirements",
  );
  assert.equal(
    check({ caller: EXECUTOR, areFeesSponsored: "yes" }).reason,
    "invalid_payment_requirements",
  );
  const foreign = check({ caller: PAY_TO, areFeesSponsored: true });
  assert.equal(foreign.reason, "invalid_exact_starknet_payload_caller");
  assert.match(foreign.message, /extra\.caller .* is not an executor of this facilitator/);
  assert.equal(check({ feePayer: PAY_TO }).reason, "invalid_exact_starknet_fee_payer");
  assert.equal(
    check({ caller: `0x${ANY_CALLER.toString(16)}`, areFeesSponsored: true }).reason,
    "invalid_exact_starknet_payload_caller",
  );
  const split = check({ feePayer: EXECUTOR, caller: PAY_TO });
  assert.equal(split.reason, "invalid_payment_requirements");
  assert.match(split.message, /different accounts/);
  // The client's echo may not claim an unsponsored payment either.
  const signed = payload(requirements({ extra: { caller: EXECUTOR } }));
  const echo = {
    ...signed,
    accepted: { ...signed.accepted, extra: { caller: EXECUTOR, areFeesSponsored: false } },
  };
  assert.equal(reasonOf(echo, requirements({ extra: { caller: EXECUTOR } })), "invalid_payload");
  // And this project's client signs none.
  assert.throws(
    () => payload(requirements({ extra: { caller: EXECUTOR, areFeesSponsored: false } })),
    /areFeesSponsored/,
  );
});
