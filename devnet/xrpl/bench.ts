/**
 * The XRP Ledger side of the settle benchmark (bench/families.ts): the local
 * ledger with a payer per payment (a Payment's Sequence is read from the
 * ledger when it is signed, so a payer signs its next payment only once its
 * last is included), RLUSD, each ledger's close time for the delay to each
 * answer, and the project's own client scheme. Loaded only by the benchmarks.
 *
 * The ledger (benchLedger.ts) and the payers (benchSigner.ts) each run on a
 * thread of their own, off the load generator's. rippled runs on a machine
 * of its own and payers sign on theirs; on the load generator's thread, the
 * ledger's signature checks of a burst of submissions and a batch of payers'
 * signatures ran as blocks of 100 to 480 ms, and every answer that arrived
 * meanwhile was timed late: the delay the bench reported after each close
 * was partly its own.
 */
import type { PaymentRequirements } from "@x402/core/types";
import { siblingWorker } from "../../src/lib/siblingEntry.js";
import { answersById, firstMessage } from "../benchThreads.js";
import type { BenchLedger } from "../family.js";
import type { FromLedger, LedgerInput, ToLedger } from "./benchLedger.js";
import type { FromSigner, SignerInput, ToSigner } from "./benchSigner.js";
import { XRPL_MAINNET, type RunningXrpl } from "./index.js";

type LedgerInfo = Extract<FromLedger, { kind: "ready" }>["info"];

export async function xrplBench(
  payers: number,
  blockMs: number,
  env: (running: Pick<RunningXrpl, "info">) => Record<string, string>,
): Promise<BenchLedger> {
  const ledger = await startLedger({ payers, closeMs: blockMs });
  const { info } = ledger;
  const signer = await startSigner({ wsUrl: info.wsUrl, payerSeeds: info.payerSeeds });
  const issuer = info.issuers.RLUSD;
  return {
    title: "XRP Ledger",
    network: XRPL_MAINNET,
    setup: `local XRP Ledger (a ledger closes every ${blockMs} ms), on a thread of its own; RLUSD; ${payers} payers, one payment each (each pays its own fee; the service holds no keys), signing on a thread of their own`,
    // XrplLedger.submit applies to the open ledger at once; close() validates all of it.
    perBlock: undefined,
    env: env({ info }),
    payTo: info.payTo,
    asset: info.assets.RLUSD,
    amount: "0.01",
    extra: { issuer },
    sign: (i, requirements) => signer.sign(i % info.payerSeeds.length, requirements),
    balance: () => ledger.balance(info.payTo, issuer, info.assets.RLUSD),
    includedAt: (hash) => ledger.closedAt(hash),
    async stop() {
      await signer.stop();
      await ledger.stop();
    },
  };
}

/** The ledger's thread: its info, each close's time by transaction, balances, stop. */
async function startLedger(input: LedgerInput) {
  const worker = siblingWorker(import.meta.url, "benchLedger", { workerData: input });
  const ready = await firstMessage<FromLedger>(worker);
  if (ready.kind !== "ready") throw new Error("the XRPL bench's ledger did not start");
  const info: LedgerInfo = ready.info;
  // When the ledger that validated each transaction closed, on this thread's performance clock.
  const closedAtOf = new Map<string, number>();
  const balances = answersById<string>(worker);
  let stopped: (() => void) | undefined;
  worker.on("message", (m: FromLedger) => {
    if (m.kind === "closed") {
      const at = m.atEpochMs - performance.timeOrigin;
      for (const hash of m.transactions) closedAtOf.set(hash, at);
    } else if (m.kind === "balance") balances.settle(m.id, { value: m.value });
    else if (m.kind === "stopped") stopped?.();
  });
  return {
    info,
    closedAt: (hash: string) => closedAtOf.get(hash),
    balance: (account: string, issuer: string, currency: string) =>
      balances.ask((id) =>
        worker.postMessage({ kind: "balance", id, account, issuer, currency } satisfies ToLedger),
      ),
    async stop() {
      await new Promise<void>((resolve) => {
        stopped = resolve;
        worker.postMessage({ kind: "stop" } satisfies ToLedger);
      });
      await worker.terminate();
    },
  };
}

/** The payers' thread, connected to the ledger; one request per payment. */
async function startSigner(input: SignerInput) {
  const worker = siblingWorker(import.meta.url, "benchSigner", { workerData: input });
  await firstMessage<unknown>(worker);
  const signed = answersById<Record<string, unknown>>(worker);
  worker.on("message", (m: FromSigner) =>
    signed.settle(
      m.id,
      "error" in m
        ? { error: new Error(`the XRPL bench's payer could not sign: ${m.error}`) }
        : { value: m.payload },
    ),
  );
  return {
    async sign(payer: number, requirements: PaymentRequirements) {
      const payload = await signed.ask((id) =>
        worker.postMessage({ id, payer, requirements } satisfies ToSigner),
      );
      return { payload };
    },
    async stop() {
      const exited = new Promise((resolve) => worker.once("exit", resolve));
      worker.postMessage("stop");
      await exited;
    },
  };
}
