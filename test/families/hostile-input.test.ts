/**
 * Hostile input is refused on every chain family, and nothing moves.
 *
 * A malformed payload (the family's field missing, of the wrong type, not
 * in its encoding, oversized) is the caller's 400 `invalid_request` naming
 * the field, on /verify and /settle alike, and nothing is recorded. A
 * payment signed for one amount and presented for another, or signed to
 * another recipient than the requirements' payTo, is refused with the
 * family's reason. An asset the service does not list is
 * `unsupported_asset`, decided before any chain call: it is answered so
 * with the node down. Every test reads the ledger's balances and the
 * settlements table, not only status codes.
 *
 * Each test pays with its own payer and amount, so tests do not see each
 * other's rows and pass alone or in any order.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { post } from "../support/http.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";
import { startStack, type TestStack } from "../support/stack.js";
import { recorded as recordedSpelling, withRpcUrl } from "./adapter.js";
import { families } from "./index.js";
import { requestOf, requirementsFor, signedBy } from "./signing.js";

/** Each test's payer and price: nothing shared between tests. */
const CASES = {
  malformed: { payer: 0, price: 1_031n },
  amount: { payer: 1, price: 2_039n },
  payTo: { payer: 2, price: 3_041n },
  asset: { payer: 3, price: 4_049n },
} as const;
/** Whose account a payment signed to the wrong recipient would pay. */
const THIEF = 4;

interface Answers {
  verify: { isValid: boolean; invalidReason?: string; invalidMessage?: string };
  settle: { success: boolean; errorReason?: string; errorMessage?: string; transaction: string };
}

for (const family of families) {
  describe(`hostile input: ${family.name}`, () => {
    let stack: TestStack;
    let proxy: RpcProxy | undefined;

    before(async () => {
      stack = await startStack(
        withRpcUrl(family, async (nodeUrl) => {
          proxy = await startRpcProxy(nodeUrl);
          return proxy.url;
        }),
      );
    });

    after(async () => {
      await stack?.stop();
      await proxy?.close();
    });

    const payTo = () => family.payTo(stack);
    /** What payer `i`, payTo and any `others` hold. */
    const holdings = async (i: number, ...others: string[]) => {
      const accounts = [await family.payer(stack, i), payTo(), ...others];
      return Promise.all(accounts.map(async (a) => [a, await family.balanceOf(stack, a)]));
    };
    const rowsOf = async (payer: number, amount: bigint) =>
      (
        await stack.service.db
          .selectFrom("settlements")
          .selectAll()
          .where("network", "=", family.network)
          .where("payer", "=", recordedSpelling(await family.payer(stack, payer)))
          .where("amount", "=", amount.toString())
          .execute()
      ).map((r) => [r.status, r.error_reason, r.transaction]);
    const recorded = async () => {
      const count = async (table: "settlements" | "settlement_transactions") =>
        Number(
          (
            await stack.service.db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll().as("n"))
              .executeTakeFirstOrThrow()
          ).n,
        );
      return {
        settlements: await count("settlements"),
        sent: await count("settlement_transactions"),
      };
    };
    /** Both answers to `payload` presented for `requirements`. */
    const answers = async (
      payload: PaymentPayload,
      requirements: PaymentRequirements,
    ): Promise<Answers> => {
      const body = requestOf(payload, requirements);
      const verify = await post(stack.url, "/verify", body, stack.apiKey);
      assert.equal(verify.status, 200, await verify.clone().text());
      const settle = await post(stack.url, "/settle", body, stack.apiKey);
      assert.equal(settle.status, 200, await settle.clone().text());
      return { verify: (await verify.json()) as never, settle: (await settle.json()) as never };
    };
    const assertRefused = (out: Answers, reason: string) => {
      assert.deepEqual(
        [out.verify.isValid, out.verify.invalidReason],
        [false, reason],
        out.verify.invalidMessage,
      );
      assert.deepEqual(
        [out.settle.success, out.settle.errorReason, out.settle.transaction],
        [false, reason, ""],
        out.settle.errorMessage,
      );
    };

    for (const malformed of family.malformedPayloads) {
      const title = `${malformed.what}: /verify and /settle answer 400 invalid_request naming ${malformed.field}; nothing recorded`;
      test(title, { todo: malformed.todo ?? false }, async () => {
        const c = CASES.malformed;
        const requirements = await requirementsFor(stack, family, c.price);
        const valid = await signedBy(stack, family, c.payer, requirements);
        const body = requestOf({ ...valid, payload: malformed.spoil(valid.payload) }, requirements);
        const [held, before] = [await holdings(c.payer), await recorded()];

        for (const path of ["/verify", "/settle"]) {
          const res = await post(stack.url, path, body, stack.apiKey);
          const answer = (await res.json()) as Record<string, unknown>;
          assert.equal(res.status, 400, `${path}: ${JSON.stringify(answer)}`);
          assert.equal(answer["error"], "invalid_request", path);
          assert.ok(
            String(answer["message"]).includes(malformed.field),
            `${path} names ${malformed.field}: ${String(answer["message"])}`,
          );
        }

        assert.deepEqual(await recorded(), before, "no settlement and no transaction recorded");
        assert.deepEqual(await holdings(c.payer), held, "nothing moved");
      });
    }

    test("a payload naming another payer in a field its scheme does not read: /verify and /settle answer 400 naming the field; nothing recorded", async () => {
      const c = CASES.malformed;
      const requirements = await requirementsFor(stack, family, c.price);
      const valid = await signedBy(stack, family, c.payer, requirements);
      const victim = await family.payer(stack, c.payer === 0 ? 1 : 0);
      const payload = { ...valid, payload: { ...valid.payload, payer: victim } };
      const body = requestOf(payload, requirements);
      const [held, before] = [await holdings(c.payer), await recorded()];
      for (const path of ["/verify", "/settle"]) {
        const res = await post(stack.url, path, body, stack.apiKey);
        const answer = (await res.json()) as Record<string, unknown>;
        assert.equal(res.status, 400, `${path}: ${JSON.stringify(answer)}`);
        assert.equal(answer["error"], "invalid_request", path);
        assert.match(String(answer["message"]), /payer/, path);
      }
      assert.deepEqual(await recorded(), before, "no settlement and no transaction recorded");
      assert.deepEqual(await holdings(c.payer), held, "nothing moved");
    });

    test(`a payment signed for one amount presented for another: refused with ${family.reasons.amount}, nothing moves`, async () => {
      const c = CASES.amount;
      const signed = await signedBy(
        stack,
        family,
        c.payer,
        await requirementsFor(stack, family, c.price),
      );
      // The route asks twice what the payer signed for.
      const asked = await requirementsFor(stack, family, 2n * c.price);
      const held = await holdings(c.payer);

      assertRefused(await answers(signed, asked), family.reasons.amount);

      assert.deepEqual(await holdings(c.payer), held, "nothing moved");
      assert.deepEqual(
        await rowsOf(c.payer, 2n * c.price),
        [["failed", family.reasons.amount, null]],
        "the refusal is on record, with nothing sent",
      );
    });

    test(`a payment signed to another payTo than the requirements name: refused with ${family.reasons.payTo}, nothing moves`, async () => {
      const c = CASES.payTo;
      const thief = await family.payer(stack, THIEF);
      const signed = await signedBy(
        stack,
        family,
        c.payer,
        await requirementsFor(stack, family, c.price, thief),
      );
      const asked = await requirementsFor(stack, family, c.price);
      const held = await holdings(c.payer, thief);

      assertRefused(await answers(signed, asked), family.reasons.payTo);

      assert.deepEqual(await holdings(c.payer, thief), held, "nothing moved, to anyone");
      assert.deepEqual(
        await rowsOf(c.payer, c.price),
        [["failed", family.reasons.payTo, null]],
        "the refusal is on record, with nothing sent",
      );
    });

    test(`an asset the service does not list (${family.unlistedAsset}): unsupported_asset before any chain call, nothing moves`, async () => {
      const c = CASES.asset;
      const listed = await requirementsFor(stack, family, c.price);
      const signed = await signedBy(stack, family, c.payer, listed);
      const unlisted = { ...listed, asset: family.unlistedAsset };
      const held = await holdings(c.payer);

      // The node is down: an answer other than 503 was reached without it.
      proxy!.state.down = true;
      let out: Answers;
      try {
        out = await answers(signed, unlisted);
      } finally {
        proxy!.state.down = false;
      }
      assertRefused(out, "unsupported_asset");
      assert.match(String(out.verify.invalidMessage), /GET \/supported/, "says where to look");

      assert.deepEqual(await holdings(c.payer), held, "nothing moved");
      assert.deepEqual(
        await rowsOf(c.payer, c.price),
        [["failed", "unsupported_asset", null]],
        "the refusal is on record, with nothing sent",
      );
    });
  });
}
