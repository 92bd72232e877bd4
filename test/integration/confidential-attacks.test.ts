/**
 * Attacks on confidential settlement through the service (issue 37), each
 * against the real vault on the devnet's eip155:8453 with the fhEVM mock:
 * what an API-key holder or a payer can make the service credit, and the
 * ways a day's batch or a withdrawal could be lost: a day whose batch does
 * not run, a credit the vault does not back, two replicas running the
 * worker at once, a withdrawal whose submit answer is lost by a provider
 * that also refuses long log reads.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { authorizationTypes } from "@x402/evm";
import type { PaymentRequirements } from "@x402/core/types";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import {
  createPublicClient,
  createTestClient,
  decodeFunctionData,
  getAddress,
  http,
  stringToHex,
  toHex,
  type Hex,
} from "viem";
import { declareDiscoveryExtension } from "@x402/extensions/bazaar";
import { parseBuilderCodeSuffixFromCalldata } from "@x402/extensions/builder-code";
import { confidentialVaultAbi } from "../../src/chains/evm/confidential/vaultAbi.js";
import { privateKeyToAccount } from "viem/accounts";
import { startStack, type TestStack } from "../support/stack.js";
import { paymentRequest, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import {
  confidentialRequirements,
  enableWithNewWallet,
  withdrawTypedDataFromJson,
} from "../chains/evm/confidential.js";
import { startRpcProxy, type RpcProxy } from "../support/rpcProxy.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { openConfidential } from "../../src/features/confidential/createConfidential.js";
import { ConfidentialWithdrawals } from "../../src/features/confidential/withdrawals.js";
import { ConfidentialWorker } from "../../src/workers/confidentialWorker.js";
import { loadConfidentialVault } from "../../src/chains/index.js";
import { createLogger } from "../../src/lib/logger.js";
import { startDevnetFhevm } from "../../devnet/evm/fhevm.js";
import { Registry } from "prom-client";

/** An EIP-3009 authorization to `requirements.payTo` with a nonce of the caller's choosing. */
async function authorize(
  payerKey: Hex,
  requirements: PaymentRequirements,
  nonce: Hex,
  opts: { value?: string; signature?: Hex; chainNow?: number } = {},
): Promise<Record<string, unknown>> {
  const payer = privateKeyToAccount(payerKey);
  const authorization = {
    from: payer.address,
    to: getAddress(requirements.payTo),
    value: opts.value ?? requirements.amount,
    validAfter: "0",
    // Valid on the service's clock and on the chain's, which tests move ahead.
    validBefore: String(Math.max(Math.floor(Date.now() / 1000), opts.chainNow ?? 0) + 3600),
    nonce,
  };
  const signature =
    opts.signature ??
    (await payer.signTypedData({
      domain: {
        name: "USD Coin",
        version: "2",
        chainId: 8453,
        verifyingContract: getAddress(requirements.asset),
      },
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: {
        ...authorization,
        value: BigInt(authorization.value),
        validAfter: BigInt(authorization.validAfter),
        validBefore: BigInt(authorization.validBefore),
      },
    }));
  return { authorization, signature };
}

interface Merchant {
  accountId: string;
  apiKey: string;
  wallet: Hex;
  account: ReturnType<typeof privateKeyToAccount>;
  slot: bigint;
}

const DAY_S = 86_400;

describe("confidential settlement attacks through the service", () => {
  let stack: TestStack;
  let dir: string;
  /** What the replicas log at warn and above. */
  const logged: { level: number; msg: string; [k: string]: unknown }[] = [];
  const log = pino(
    { level: "warn" },
    { write: (line: string) => void logged.push(JSON.parse(line) as (typeof logged)[number]) },
  );
  const replicas: { close(): Promise<void> }[] = [];
  const proxies: RpcProxy[] = [];

  before(async () => {
    stack = await startStack({
      confidential: true,
      confidentialWorker: false,
      payers: 6,
      // This service's own builder code, as a deployment may set it.
      env: { BUILDER_CODE: "bc_facilitator" },
    });
    dir = mkdtempSync(join(tmpdir(), "confidential-attacks-"));
  });
  after(async () => {
    for (const r of replicas) await r.close();
    for (const p of proxies) await p.close();
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Another replica of the service's confidential side, on the same
   * database and vault, with its own operator-key client (optionally
   * through `rpcUrl`). Replicas share the mock KMS's knowledge of encrypted
   * inputs through one file, as Zama's KMS serves everyone alike.
   */
  const replica = async (opts: { rpcUrl?: string } = {}) => {
    const conf = stack.devnet.networks["eip155:8453"]!.confidential!;
    const r = await openConfidential({
      db: stack.service.db,
      vault: {
        rpcUrl: opts.rpcUrl ?? stack.rpcUrl,
        chainId: 8453,
        contractAddress: conf.contractAddress,
        operatorKey: conf.operatorPrivateKey,
        mode: {
          mock: () =>
            startDevnetFhevm({
              rpcUrl: stack.rpcUrl,
              chainId: 8453,
              cleartextFile: join(dir, "cleartexts.jsonl"),
            }),
        },
      },
      loadVault: loadConfidentialVault,
      log,
      settings: { unitsPerSettlement: 2, batchLeaseMs: 60_000 },
    });
    replicas.push(r);
    return r;
  };
  const chainNow = async () => Number(await stack.service.confidential.vault!.chainTime());
  /** Moves the chain to `seconds` into UTC day `day`; the same instant for the service's clock. */
  const toDay = async (day: number, seconds = 60): Promise<Date> => {
    const testClient = createTestClient({ mode: "anvil", transport: http(stack.rpcUrl) });
    await testClient.setNextBlockTimestamp({ timestamp: BigInt(day * DAY_S + seconds) });
    await testClient.mine({ blocks: 1 });
    return new Date((day * DAY_S + seconds) * 1000);
  };
  const today = async () => Math.floor((await chainNow()) / DAY_S);

  const merchant = async (name: string): Promise<Merchant> => {
    const { db, confidential } = stack.service;
    const account = await createAccount(db, name);
    const apiKey = (await createApiKey(db, account.id, "k")).key;
    const { wallet, merchant } = await enableWithNewWallet(confidential.merchants, account.id);
    return {
      accountId: account.id,
      apiKey,
      wallet: wallet.address,
      account: wallet,
      slot: merchant.slot!,
    };
  };
  const settle = async (m: Merchant, requirements: PaymentRequirements, payload: unknown) =>
    (await (
      await post(
        stack.url,
        "/settle",
        paymentRequest(requirements, payload as Record<string, unknown>),
        m.apiKey,
      )
    ).json()) as Record<string, unknown> & {
      extensions?: { confidential?: Record<string, string> };
    };
  const creditsOf = (accountId: string) =>
    stack.service.db
      .selectFrom("confidential_credits")
      .select(["account_id", "amount", "payment_nonce", "merchant_address"])
      .where("account_id", "=", accountId)
      .execute();
  const offer = (m: Merchant, amount: string) =>
    confidentialRequirements({
      usdc: stack.usdc,
      vault: stack.service.confidential.vault!.address,
      merchant: m.wallet,
      amount,
    });
  /** A real confidential payment to `m` through /settle. */
  const pay = async (m: Merchant, amount: string, payerIndex: number) => {
    const req = offer(m, amount);
    const nonce = toHex(randomBytes(32));
    const chain = await chainNow();
    const res = await settle(
      m,
      req,
      await authorize(stack.payerKeys[payerIndex]!, req, nonce, { chainNow: chain }),
    );
    assert.equal(res["success"], true, JSON.stringify(res));
    return res;
  };
  /** A withdrawal request signed by `m`'s wallet, as the dashboard prepares it. */
  const signedWithdrawal = async (w: ConfidentialWithdrawals, m: Merchant, amount: string) => {
    const typedData = (await w.typedData(m.accountId, amount)) as Record<string, unknown>;
    const signature = await m.account.signTypedData(withdrawTypedDataFromJson(typedData));
    return { typedData, signature };
  };
  const withdrawalRows = (m: Merchant) =>
    stack.service.db
      .selectFrom("confidential_withdrawals")
      .select(["state", "paid_amount", "error"])
      .where("account_id", "=", m.accountId)
      .orderBy("created_at")
      .execute();

  test("planted credit: a bogus settle leaves nothing; the real payment is credited to its own merchant for its signed amount", async () => {
    const attacker = await merchant("attacker");
    const victim = await merchant("victim");
    const payerKey = stack.payerKeys[0]!;
    const nonce = toHex(randomBytes(32));

    // (a) The attacker settles a payment it cannot sign, with a nonce the
    // payer will use later, for an amount of its choosing.
    const huge = offer(attacker, "1000000000000");
    const bogus = await settle(
      attacker,
      huge,
      await authorize(payerKey, huge, nonce, { signature: "0x00" }),
    );
    assert.equal(bogus["success"], false, JSON.stringify(bogus));
    assert.deepEqual(await creditsOf(attacker.accountId), [], "a refused settle leaves no credit");

    // The payer's real payment with that nonce, to the victim, at its price.
    const price = offer(victim, "2500");
    const paid = await settle(victim, price, await authorize(payerKey, price, nonce));
    assert.equal(paid["success"], true, JSON.stringify(paid));
    const receipt = paid.extensions?.confidential;
    assert.ok(receipt, "the victim gets its receipt");
    assert.equal(receipt["amount"], "2500");
    assert.equal(receipt["slot"], victim.slot.toString());
    // The vault bound the payment to the victim's slot when it collected it.
    const { commitment } = await stack.service.confidential.vault!.payment(receipt["key"] as Hex);
    assert.equal(commitment, receipt["commitment"]);
    assert.deepEqual(
      (await creditsOf(victim.accountId)).map((c) => [c.amount, c.payment_nonce]),
      [["2500", nonce]],
    );
    assert.deepEqual(await creditsOf(attacker.accountId), []);

    // (b) Inflation: a bogus settle for 10^12, then the attacker's real
    // payment of 1 with the same nonce: credited and receipted for 1.
    const nonce2 = toHex(randomBytes(32));
    await settle(attacker, huge, await authorize(payerKey, huge, nonce2, { signature: "0x00" }));
    const one = offer(attacker, "1");
    const small = await settle(attacker, one, await authorize(payerKey, one, nonce2));
    assert.equal(small["success"], true, JSON.stringify(small));
    assert.equal(small.extensions?.confidential?.["amount"], "1");
    assert.deepEqual(
      (await creditsOf(attacker.accountId)).map((c) => c.amount),
      ["1"],
    );
  });

  test("privacy: no builder code rides on a confidential payment's calldata, and its offer is not cataloged", async () => {
    const m = await merchant("private shop");
    const req = offer(m, "1700");
    const auth = await authorize(stack.payerKeys[1]!, req, toHex(randomBytes(32)), {
      chainNow: await chainNow(),
    });
    const url = "https://private-shop.example.com/report";
    const { bazaar } = declareDiscoveryExtension({ output: { example: { ok: true } } });
    const declaration = structuredClone(bazaar) as unknown as {
      info: { input: Record<string, unknown> };
    };
    declaration.info.input["method"] = "GET";
    const body = {
      x402Version: 2,
      paymentRequirements: req,
      paymentPayload: {
        x402Version: 2,
        accepted: req,
        payload: auth,
        resource: { url, description: "a report", mimeType: "application/json" },
        extensions: {
          // The merchant's app code (a), echoed by the client, and a client code (s).
          "builder-code": { info: { a: "bc_private_shop", s: ["bc_agent_sdk"] } },
          bazaar: declaration,
        },
      },
    };
    const extensionsOf = (res: Response) =>
      JSON.parse(
        Buffer.from(res.headers.get("extension-responses") ?? "e30=", "base64").toString(),
      ) as { bazaar?: { status: string; rejectedReason?: string } };
    const verified = await post(stack.url, "/verify", body, m.apiKey);
    assert.equal(((await verified.json()) as { isValid: boolean }).isValid, true);
    assert.notEqual(extensionsOf(verified).bazaar?.status, "success");
    const settled = await post(stack.url, "/settle", body, m.apiKey);
    const answer = (await settled.json()) as { success: boolean; transaction: Hex };
    assert.equal(answer.success, true, JSON.stringify(answer));
    assert.match(
      extensionsOf(settled).bazaar?.rejectedReason ?? "",
      /confidential offer is not cataloged/,
    );

    // The mined calldata: the vault's collect, with no ERC-8021 suffix and
    // neither the merchant's app code nor the others anywhere in it.
    const chain = createPublicClient({ transport: http(stack.rpcUrl) });
    const { input, to } = await chain.getTransaction({ hash: answer.transaction });
    assert.equal(getAddress(to!), stack.service.confidential.vault!.address);
    assert.equal(
      decodeFunctionData({ abi: confidentialVaultAbi, data: input }).functionName,
      "collect",
    );
    assert.equal(parseBuilderCodeSuffixFromCalldata(input), undefined);
    for (const code of ["bc_private_shop", "bc_agent_sdk", "bc_facilitator", "80218021"]) {
      const hex = code.startsWith("bc_") ? stringToHex(code).slice(2) : code;
      assert.ok(!input.toLowerCase().includes(hex), `${code} is in the calldata`);
    }

    // Nothing in the public catalog names the vault or the merchant.
    const listed = (await (
      await fetch(
        `${stack.url}/discovery/resources?payTo=${stack.service.confidential.vault!.address}`,
      )
    ).json()) as { items: unknown[] };
    assert.deepEqual(listed.items, []);
    const rows = await stack.service.db
      .selectFrom("catalog_resources")
      .select("resource")
      .where("resource", "=", url)
      .execute();
    assert.deepEqual(rows, []);
  });

  test("a day whose batch did not run is closed by the worker two days later; meanwhile it is counted late and logged", async () => {
    const r = await replica();
    const m = await merchant("late day");
    const day = await today();
    await pay(m, "3000", 1);
    await pay(m, "2000", 2);
    // The batch does not run on the next day, nor the one after.
    const at = await toDay(day + 3, 600);
    const registry = new Registry();
    const batch = Object.create(r.batch!) as NonNullable<typeof r.batch>;
    const worker = new ConfidentialWorker({
      batch,
      withdrawals: r.withdrawals!,
      credits: r.credits!,
      log,
      registry,
      now: () => at,
    });
    const gauge = async () =>
      (await registry.getSingleMetric("x402_confidential_unclosed_days")?.get())?.values[0]?.value;

    // First pass: the relayer is down.
    batch.run = () => Promise.reject(new Error("the relayer is down"));
    logged.length = 0;
    await worker.pass();
    assert.equal(await gauge(), 1, "the day is counted late");
    assert.ok(
      logged.some((l) => l.level >= 50 && /not closed/.test(l.msg)),
      "the late day is logged as an error",
    );

    // Next pass: it runs, for that day, two days late.
    delete (batch as { run?: unknown }).run;
    await worker.pass();
    assert.equal((await r.vault!.dayInfo(day)).phase, "closed");
    assert.equal(await r.vault!.balance(m.slot), 5000n);
    assert.deepEqual(
      (
        await stack.service.db
          .selectFrom("confidential_credits")
          .select("credited_day")
          .where("account_id", "=", m.accountId)
          .execute()
      ).map((c) => c.credited_day),
      [day, day],
    );
    assert.equal(await gauge(), 0);
  });

  test("a credit the vault does not back is skipped and reported; the rest of the day is credited", async () => {
    const r = await replica();
    const m = await merchant("bad row");
    const day = await today();
    await pay(m, "1500", 3);
    // A row the vault has no payment for (as a bug or a reorg would leave it).
    const payer = privateKeyToAccount(stack.payerKeys[4]!).address;
    const nonce = toHex(randomBytes(32));
    await stack.service.db
      .insertInto("confidential_credits")
      .values({
        authorization_key: `bogus:${nonce}`,
        account_id: m.accountId,
        merchant_address: m.wallet.toLowerCase(),
        network: "eip155:8453",
        asset: stack.usdc.toLowerCase(),
        payer: payer.toLowerCase(),
        amount: "999999",
        payment_nonce: nonce,
        payment_key: r.vault!.paymentKey(payer, nonce),
        day,
      })
      .execute();
    const at = await toDay(day + 1);
    logged.length = 0;
    const outcome = await r.batch!.run(day, at);
    assert.equal(outcome.ran, true, JSON.stringify(outcome));
    assert.deepEqual(outcome.ran && { credits: outcome.credits, skipped: outcome.skipped }, {
      credits: 1,
      skipped: 1,
    });
    assert.equal(await r.vault!.balance(m.slot), 1500n);
    const listed = await r.credits!.list(m.accountId);
    assert.deepEqual(listed.map((c) => [c.amount, c.state]).sort(), [
      ["1500", "available"],
      ["999999", "unbacked"],
    ]);
    assert.match(listed.find((c) => c.state === "unbacked")!.problem ?? "", /no such payment/);
    assert.ok(
      logged.some((l) => l.level >= 50 && /skipped/.test(l.msg)),
      "reported",
    );
  });

  test("two replicas run the worker at once: the day is closed once, each withdrawal paid once, no nonce collides", async () => {
    const [r1, r2] = [await replica(), await replica()];
    const a = await merchant("two replicas A");
    const b = await merchant("two replicas B");
    const day1 = await today();
    await pay(a, "4000", 0);
    await pay(b, "6000", 1);
    await toDay(day1 + 1);
    assert.equal((await r1.batch!.run(day1, new Date((await chainNow()) * 1000))).ran, true);
    await pay(a, "1000", 2);
    await pay(b, "1000", 3);
    const at = await toDay(day1 + 2);
    // Withdrawals whose submission was never confirmed: both workers resubmit and finalize them.
    for (const [m, amount] of [
      [a, "3000"],
      [b, "5000"],
    ] as const) {
      const { typedData, signature } = await signedWithdrawal(r1.withdrawals!, m, amount);
      await stack.service.db
        .insertInto("confidential_withdrawals")
        .values({
          id: crypto.randomUUID(),
          account_id: m.accountId,
          amount,
          request: JSON.stringify(typedData),
          signature,
          state: "submitting",
          updated_at: new Date(Date.now() - 600_000),
        })
        .execute();
    }
    const worker = (r: typeof r1) =>
      new ConfidentialWorker({
        batch: r.batch!,
        withdrawals: r.withdrawals!,
        credits: r.credits!,
        log,
        now: () => at,
      });
    const [w1, w2] = [worker(r1), worker(r2)];
    logged.length = 0;
    await Promise.all([w1.pass(), w2.pass()]);
    await Promise.all([w1.pass(), w2.pass()]);
    assert.deepEqual(
      logged.filter((l) => l.level >= 40).map((l) => `${l.msg}: ${String(l["err"] ?? "")}`),
      [],
      "nothing failed",
    );
    assert.equal((await r1.vault!.dayInfo(day1 + 1)).phase, "closed");
    for (const [m, paid, left] of [
      [a, 3000n, 2000n],
      [b, 5000n, 2000n],
    ] as const) {
      assert.deepEqual(await withdrawalRows(m), [
        { state: "finalized", paid_amount: paid.toString(), error: null },
      ]);
      assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, m.wallet), paid, "paid once");
      assert.equal(await r1.vault!.balance(m.slot), left);
    }
  });

  test("a withdrawal whose submit answer was lost, behind a provider that refuses log reads: found on-chain, paid once, and the next one goes through", async () => {
    const r = await replica();
    const m = await merchant("lost answer");
    const day = await today();
    await pay(m, "2000", 5);
    await toDay(day + 1);
    assert.equal((await r.batch!.run(day, new Date((await chainNow()) * 1000))).ran, true);

    const proxy = await startRpcProxy(stack.rpcUrl, "eth_sendRawTransaction");
    proxies.push(proxy);
    proxy.state.refuseMatching = "eth_getLogs";
    const behind = await replica({ rpcUrl: proxy.url });
    const w = new ConfidentialWithdrawals(
      stack.service.db,
      behind.vault!,
      behind.merchants,
      createLogger("silent"),
      { resubmitAfterMs: 0 },
    );
    const first = await signedWithdrawal(w, m, "1200");
    proxy.state.drops = 1;
    proxy.state.dropWhenMined = true;
    await assert.rejects(w.submit(m.accountId, first.typedData as never, first.signature), {
      code: "service_unavailable",
    });
    assert.equal(proxy.state.dropped, 1, "the request reached the chain; its answer did not");
    assert.deepEqual(
      (await withdrawalRows(m)).map((x) => x.state),
      ["submitting"],
    );
    await w.finalizeOpen();
    assert.deepEqual(
      (await withdrawalRows(m)).map((x) => [x.state, x.paid_amount]),
      [["finalized", "1200"]],
    );
    assert.equal(await usdcBalance(stack.rpcUrl, stack.usdc, m.wallet), 1200n);
    // The account is not blocked: the next withdrawal goes through.
    const second = await signedWithdrawal(w, m, "500");
    const done = await w.submit(m.accountId, second.typedData as never, second.signature);
    assert.deepEqual([done.state, done.paidAmount], ["finalized", "500"]);
    assert.equal(await r.vault!.balance(m.slot), 300n);
  });
});
