/**
 * One Starknet executor's sends overlap: each transaction is put on the wire
 * without waiting for the node to accept the one before. A proxy in front of
 * the node passes every call on at once, in the order it came, but holds the
 * node's answers to the first sends until several sends have arrived: sent
 * one at a time, the second would wait for the first's answer and never
 * come. Every payment still lands once, at consecutive nonces, each signed
 * once.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PaymentRequirements } from "@x402/core/types";
import { Account, RpcProvider, stark } from "starknet";
import { STARKNET_MAINNET } from "../../../devnet/starknet/index.js";
import { STARKNET_USDC } from "../../../src/chains/starknet/networks.js";
import { outsideExecutionFor } from "../../../src/chains/starknet/clients/exactClient.js";
import { startStack, type TestStack } from "../../support/stack.js";
import { paymentRequest } from "../../chains/evm/payments.js";
import { post } from "../../support/http.js";

/** Sends on the wire at once before the node's answers to them are let through. */
const OVERLAP = 3;

interface HoldingProxy {
  url: string;
  /** The most sends that had arrived while none of them was answered yet. */
  maxUnanswered: number;
  close(): Promise<void>;
}

/**
 * Passes calls to the node in arrival order; answers to
 * `starknet_addInvokeTransaction` wait until `OVERLAP` of them arrived (or,
 * so a broken sender fails instead of hanging, until the service's own
 * settle budget has long passed).
 */
async function startHoldingProxy(target: string): Promise<HoldingProxy> {
  let arrived = 0;
  let unanswered = 0;
  let released = false;
  const waiting: (() => void)[] = [];
  const release = () => {
    released = true;
    for (const answer of waiting.splice(0)) answer();
  };
  const safety = setTimeout(release, 60_000);
  let upstreamTurn: Promise<void> = Promise.resolve();
  const state: HoldingProxy = { url: "", maxUnanswered: 0, close: async () => {} };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const isSend = body.includes("starknet_addInvokeTransaction");
      if (isSend) {
        arrived++;
        unanswered++;
        state.maxUnanswered = Math.max(state.maxUnanswered, unanswered);
      }
      // To the node one at a time, in the order the calls came.
      const answered = upstreamTurn.then(() => forward(target, body));
      upstreamTurn = answered.then(
        () => undefined,
        () => undefined,
      );
      void answered.then((answer) => {
        const send = () => {
          if (isSend) unanswered--;
          res.writeHead(200, { "content-type": "application/json" });
          res.end(answer);
        };
        if (!isSend || released) send();
        else {
          waiting.push(send);
          if (arrived >= OVERLAP) release();
        }
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((r) => {
      clearTimeout(safety);
      server.closeAllConnections();
      server.close(() => r());
    });
  return state;
}

/** One call to the node, its answer's body. */
function forward(target: string, body: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const up = request(
      target,
      { method: "POST", headers: { "content-type": "application/json" } },
      (r) => {
        const out: Buffer[] = [];
        r.on("data", (c: Buffer) => out.push(c));
        r.on("end", () => resolve(Buffer.concat(out)));
      },
    );
    up.on("error", reject);
    up.end(body);
  });
}

describe("Starknet: one executor's sends overlap", () => {
  let stack: TestStack;
  let proxy: HoldingProxy;
  let provider: RpcProvider;

  before(async () => {
    stack = await startStack({
      families: {
        starknet: {
          rpcUrl: async (nodeUrl) => {
            proxy = await startHoldingProxy(nodeUrl);
            return proxy.url;
          },
        },
      },
    });
    provider = new RpcProvider({ nodeUrl: stack.families.starknet!.info.rpcUrl });
  });
  after(async () => {
    await stack?.stop();
    await proxy?.close();
  });

  test("sends leave before the one ahead is accepted, in nonce order; each payment signed once and landed once", async () => {
    const info = stack.families.starknet!.info;
    const ledger = stack.families.starknet!.ledger;
    const requirements = (amount: string): PaymentRequirements => ({
      scheme: "exact",
      network: STARKNET_MAINNET,
      asset: STARKNET_USDC,
      amount,
      payTo: info.payTo,
      maxTimeoutSeconds: 300,
      extra: { feePayer: info.executors[0]! },
    });
    const n = 6;
    const bodies = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const { address, privateKey } = info.payers[i % info.payers.length]!;
        const payer = new Account({ provider, address, signer: privateKey, cairoVersion: "1" });
        const req = requirements(String(7000 + i));
        const typedData = outsideExecutionFor(address, req, {
          nonce: stark.randomAddress(),
          nowSeconds: Math.floor(Date.now() / 1000),
        });
        const signature = stark.formatSignature(await payer.signMessage(typedData));
        return paymentRequest(req, { from: address, outsideExecution: { typedData, signature } });
      }),
    );
    const executor = BigInt(info.executors[0]!);
    const nonceBefore = ledger.nonceAt(executor, true);
    const payToBefore = ledger.balanceOf(STARKNET_USDC, info.payTo);

    const answers = (await Promise.all(
      bodies.map(async (b) => (await post(stack.url, "/settle", b, stack.apiKey)).json()),
    )) as { success: boolean; transaction: string; errorReason?: string }[];

    assert.deepEqual(
      answers.map((a) => [a.success, a.errorReason]),
      answers.map(() => [true, undefined]),
    );
    assert.ok(
      proxy.maxUnanswered >= OVERLAP,
      `at most ${proxy.maxUnanswered} sends were on the wire unanswered at once`,
    );
    const sum = Array.from({ length: n }, (_, i) => BigInt(7000 + i)).reduce((a, b) => a + b);
    assert.equal(ledger.balanceOf(STARKNET_USDC, info.payTo), payToBefore + sum);
    assert.equal(ledger.nonceAt(executor, true), nonceBefore + BigInt(n));
    // One journaled transaction per payment (none refused and re-signed), at consecutive nonces.
    const rows = await stack.service.db
      .selectFrom("settlement_transactions as t")
      .innerJoin("settlements as s", "s.id", "t.settlement_id")
      .select(["t.detail"])
      .where(
        "s.transaction",
        "in",
        answers.map((a) => a.transaction),
      )
      .execute();
    assert.deepEqual(
      rows.map((r) => BigInt(String(r.detail["nonce"]))).sort((a, b) => (a < b ? -1 : 1)),
      Array.from({ length: n }, (_, i) => nonceBefore + BigInt(i)),
    );
  });
});
