/**
 * The fee payers' status poll, against a JSON-RPC server on loopback that
 * answers `getSignatureStatuses` from a table the test sets: a settle is
 * answered only once its journal write has committed, a slow journal write
 * holds only its own settle (the poll goes on for the others), and a journal
 * that fails turns the chain's word into an error, not an answer.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateKeyPairSigner } from "@solana/kit";
import { createLogger } from "../../lib/logger.js";
import type { TransactionJournal } from "../ports.js";
import { SvmFeePayers } from "./feePayers.js";
import { currentSettlement, runInSettlementScope } from "../settlementScope.js";

let server: Server;
let url: string;
/** The status each signature reports; absent: not found. */
const statuses = new Map<string, { confirmationStatus: string; err: unknown }>();

before(async () => {
  server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (raw += c));
    req.on("end", () => {
      const call = JSON.parse(raw) as { id: unknown; method: string; params: [string[]] };
      const value = call.params[0].map((s) => {
        const st = statuses.get(s);
        return st ? { slot: 7, confirmations: 1, status: { Ok: null }, ...st } : null;
      });
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({ jsonrpc: "2.0", id: call.id, result: { context: { slot: 8 }, value } }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((r) => server.close(() => r())));

/** A journal whose `finished` writes the test holds or fails, one signature at a time. */
function journal() {
  const held = new Map<string, { release: () => void; fail: (e: Error) => void }>();
  const written: string[] = [];
  const waiting = new Map<string, () => void>();
  const j: TransactionJournal = {
    sent: async () => undefined,
    finished: (reference) =>
      new Promise<void>((resolve, reject) => {
        held.set(reference, {
          release: () => {
            written.push(reference);
            resolve();
          },
          fail: reject,
        });
        waiting.get(reference)?.();
      }),
  };
  /** Resolves once the journal has been asked to record `reference`. */
  const asked = (reference: string) =>
    held.has(reference) ? Promise.resolve() : new Promise<void>((r) => waiting.set(reference, r));
  return { journal: j, held, written, asked };
}

async function feePayers(j: TransactionJournal) {
  return new SvmFeePayers({
    network: "solana:test",
    rpcUrl: url,
    keys: [await generateKeyPairSigner()],
    journal: j,
    log: createLogger("silent"),
    commitment: "confirmed",
    confirmTimeoutMs: 60_000,
    minLamports: 0n,
    pollMs: 10,
  });
}

test("a confirmed settle is answered once its journal write commits, and a slow write holds no other settle", async () => {
  const { journal: j, held, written, asked } = journal();
  const payers = await feePayers(j);
  let slowAnswered = false;
  const slow = payers.signer.confirmTransaction("slow", "solana:test").then(() => {
    slowAnswered = true;
  });
  const quick = payers.signer.confirmTransaction("quick", "solana:test");
  statuses.set("slow", { confirmationStatus: "confirmed", err: null });
  await asked("slow");
  // The slow one's write is held; the other confirms later and is answered meanwhile.
  statuses.set("quick", { confirmationStatus: "confirmed", err: null });
  await asked("quick");
  held.get("quick")!.release();
  await quick;
  assert.equal(slowAnswered, false, "not answered before its journal write committed");
  held.get("slow")!.release();
  await slow;
  assert.deepEqual(written, ["quick", "slow"]);
});

test("a journal write that fails answers the settle with that error, not a success", async () => {
  const { journal: j, held, asked } = journal();
  const payers = await feePayers(j);
  const settle = payers.signer.confirmTransaction("unrecorded", "solana:test");
  statuses.set("unrecorded", { confirmationStatus: "finalized", err: null });
  await asked("unrecorded");
  held.get("unrecorded")!.fail(new Error("database down"));
  await assert.rejects(settle, /database down/);
});

test("a transaction that failed on-chain is journaled, then answered as failed", async () => {
  const { journal: j, held, written, asked } = journal();
  const payers = await feePayers(j);
  const settle = payers.signer.confirmTransaction("reverted", "solana:test");
  statuses.set("reverted", { confirmationStatus: "processed", err: { InstructionError: [0, 1] } });
  await asked("reverted");
  held.get("reverted")!.release();
  await assert.rejects(settle, /failed on-chain/);
  assert.deepEqual(written, ["reverted"]);
});

test("each settle journals its own transaction's word in its own scope, though the first to wait started the poller", async () => {
  const { journal: j, held, asked } = journal();
  const scopes = new Map<string, string | undefined>();
  const watched: TransactionJournal = {
    ...j,
    finished: (...args) => {
      scopes.set(args[0], currentSettlement()?.id);
      return j.finished(...args);
    },
  };
  const payers = await feePayers(watched);
  const first = runInSettlementScope(
    { id: "first", notes: { sent: false, journalFinished: [] } },
    () => payers.signer.confirmTransaction("first-tx", "solana:test"),
  );
  const second = payers.signer.confirmTransaction("second-tx", "solana:test");
  statuses.set("first-tx", { confirmationStatus: "confirmed", err: null });
  statuses.set("second-tx", { confirmationStatus: "confirmed", err: null });
  await Promise.all([asked("first-tx"), asked("second-tx")]);
  held.get("first-tx")!.release();
  held.get("second-tx")!.release();
  await Promise.all([first, second]);
  // The first settle's outcome statement writes its own word, and only its
  // own: the second's, decided by the same poll, is no part of it.
  assert.deepEqual([...scopes].sort(), [
    ["first-tx", "first"],
    ["second-tx", undefined],
  ]);
});
