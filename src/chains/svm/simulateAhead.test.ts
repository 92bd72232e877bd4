/**
 * A settle's simulation started ahead (`SvmFeePayers.simulateAhead`), against
 * a JSON-RPC server on loopback that counts `simulateTransaction` calls and
 * answers each as the test says: the re-verification takes a fresh one
 * instead of asking the node again, once; an old one, or one that never
 * reached the node, is asked again; and a refusal the node gave ahead is
 * the refusal the re-verification meets.
 */
import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateKeyPairSigner } from "@solana/kit";
import { createLogger } from "../../lib/logger.js";
import { SvmFeePayers } from "./feePayers.js";

let server: Server;
let url: string;
/** The transactions simulated, in order. */
let simulated: string[] = [];
/** How the node answers the next simulations, first first; empty: success. */
let answers: ("ok" | "fails" | "unreachable")[] = [];

before(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (raw += c));
    req.on("end", () => {
      const call = JSON.parse(raw) as { id: unknown; method: string; params: [string] };
      if (call.method !== "simulateTransaction") {
        res.statusCode = 400;
        res.end();
        return;
      }
      simulated.push(call.params[0]);
      const answer = answers.shift() ?? "ok";
      if (answer === "unreachable") {
        res.statusCode = 503;
        res.end("unavailable");
        return;
      }
      const err = answer === "fails" ? { InstructionError: [2, { Custom: 1 }] } : null;
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          jsonrpc: "2.0",
          id: call.id,
          result: {
            context: { slot: 8 },
            value: { err, logs: [], accounts: null, unitsConsumed: 1, returnData: null },
          },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((r) => server.close(() => r())));

beforeEach(() => {
  simulated = [];
  answers = [];
});

async function feePayers(clock: { at: number }) {
  return new SvmFeePayers({
    network: "solana:test",
    rpcUrl: url,
    keys: [await generateKeyPairSigner()],
    journal: { sent: async () => undefined, finished: async () => undefined },
    log: createLogger("silent"),
    commitment: "confirmed",
    confirmTimeoutMs: 60_000,
    minLamports: 0n,
    now: () => clock.at,
  });
}

// The node is never asked to decode these: any string stands for a transaction.
const TX = "AQID";
const OTHER = "BAUG";

test("the re-verification takes the simulation started ahead instead of asking the node again, once", async () => {
  const clock = { at: 1_000_000 };
  const payers = await feePayers(clock);
  payers.simulateAhead(TX, "solana:test");
  payers.simulateAhead(TX, "solana:test"); // a concurrent duplicate of the same payment
  clock.at += 400;
  await payers.signer.simulateTransaction(TX, "solana:test");
  assert.deepEqual(simulated, [TX], "one simulation for the payment, started ahead");
  // Taken once: a later re-verification of the same transaction asks afresh.
  await payers.signer.simulateTransaction(TX, "solana:test");
  assert.deepEqual(simulated, [TX, TX]);
});

test("a simulation started ahead more than a second before the re-verification is not used", async () => {
  const clock = { at: 2_000_000 };
  const payers = await feePayers(clock);
  answers = ["ok", "fails"];
  payers.simulateAhead(TX, "solana:test");
  clock.at += 1_001;
  // The payer moved its funds meanwhile: only the new simulation can tell.
  await assert.rejects(payers.signer.simulateTransaction(TX, "solana:test"), /Simulation failed/);
  assert.deepEqual(simulated, [TX, TX]);
});

test("a refusal the node gave ahead is the refusal the re-verification meets", async () => {
  const clock = { at: 3_000_000 };
  const payers = await feePayers(clock);
  answers = ["fails"];
  payers.simulateAhead(TX, "solana:test");
  await assert.rejects(payers.signer.simulateTransaction(TX, "solana:test"), /Custom/);
  assert.deepEqual(simulated, [TX]);
});

test("a simulation ahead that never reached the node is asked again", async () => {
  const clock = { at: 4_000_000 };
  const payers = await feePayers(clock);
  answers = ["unreachable"];
  payers.simulateAhead(TX, "solana:test");
  // The re-verification meets the node again: its answer, not the lost one, decides.
  await payers.signer.simulateTransaction(TX, "solana:test");
  assert.deepEqual(simulated, [TX, TX]);
});

test("simulations ahead of other transactions, and options the mechanism sets, are not mixed up", async () => {
  const clock = { at: 5_000_000 };
  const payers = await feePayers(clock);
  payers.simulateAhead(OTHER, "solana:test");
  await payers.signer.simulateTransaction(TX, "solana:test");
  await payers.signer.simulateTransaction(OTHER, "solana:test", { sigVerify: true });
  assert.deepEqual(simulated, [OTHER, TX, OTHER], "each asked on its own");
});
