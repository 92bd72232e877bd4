/**
 * `npm run chaos`: a bounded, seeded chaos run on loopback that checks the
 * chains against the records.
 *
 * It starts its own PostgreSQL and Redis (from the installed servers), the
 * devnet's chains (each behind a proxy that can fail), two service
 * processes on them behind a round-robin balancer, and a webhook receiver;
 * then sends payments from several accounts (valid, duplicated, replayed,
 * retried, hostile) while it injects faults on a schedule (replicas killed
 * and stopped, RPC failures, a PostgreSQL restart, Redis down, a dropped
 * transaction, a reorg, a signer's nonce moved). At the end it checks the
 * money invariants from the chains and the database alone (see checks.ts),
 * prints each with its count, writes the history, and exits 1 on any
 * violation.
 *
 *   CHAOS_SEED     the scenario (default: a random seed, printed)
 *   CHAOS_MINUTES  how long traffic runs (default 10; fractions allowed)
 *   CHAOS_FAULTS   comma-separated fault kinds to inject (default: all)
 *   CHAOS_FAMILIES `evm` for anvil alone (default: every family)
 *   CHAOS_OUT      where the history and the service logs go (default .chaos/)
 */
import { createWriteStream, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { createAccount } from "../src/features/accounts/accounts.js";
import { createApiKey } from "../src/features/keys/apiKeys.js";
import { setWebhookEndpoint } from "../src/features/webhooks/webhookRepository.js";
import { openMigratedDb, openDb, type OpenedDb } from "../src/storage/db.js";
import { seededRandom } from "../test/support/seededRandom.js";
import { startBalancer } from "./balancer.js";
import { startEvmChains, startLedgerChains, type ChaosChain, type StackParts } from "./chains.js";
import { checkInvariants } from "./checks.js";
import { FAULT_KINDS, faultSchedule, injectFault, type FaultKind } from "./faults.js";
import { History } from "./history.js";
import { createReplica, rssOf } from "./replicas.js";
import { MissingBinary, startPostgres, startRedis } from "./servers.js";
import { Traffic } from "./traffic.js";
import { startWebhookReceiver } from "./webhookReceiver.js";

const ACCOUNTS = 3;
const SETTLE_TIMEOUT_MS = 15_000;
const RECONCILE_AFTER_MS = 20_000;
/** The reconciler decides a row within its horizon plus a pass (5 s) and a slow chain read. */
const HORIZON_MS = RECONCILE_AFTER_MS + 25_000;
const MAX_IN_FLIGHT = 6;
const MEMORY_BOUND = { factor: 2, slackBytes: 150 * 1024 * 1024 };

const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function settings() {
  const seed = Number(process.env["CHAOS_SEED"] ?? Math.floor(Math.random() * 2 ** 31));
  const minutes = Number(process.env["CHAOS_MINUTES"] ?? "10");
  if (!Number.isInteger(seed) || seed < 0) {
    say(`chaos: CHAOS_SEED must be a whole number, got "${process.env["CHAOS_SEED"]}"`);
    process.exit(2);
  }
  if (!Number.isFinite(minutes) || minutes <= 0 || minutes > 24 * 60) {
    say(`chaos: CHAOS_MINUTES must be minutes above 0, got "${process.env["CHAOS_MINUTES"]}"`);
    process.exit(2);
  }
  const faults = (process.env["CHAOS_FAULTS"] ?? FAULT_KINDS.join(","))
    .split(",")
    .map((f) => f.trim())
    .filter(Boolean);
  const unknown = faults.filter((f) => !(FAULT_KINDS as readonly string[]).includes(f));
  if (unknown.length > 0) {
    say(`chaos: unknown CHAOS_FAULTS ${unknown.join(", ")}; known: ${FAULT_KINDS.join(", ")}`);
    process.exit(2);
  }
  const out = resolve(process.env["CHAOS_OUT"] ?? ".chaos");
  // "evm" alone keeps a run on anvil; the default runs every family.
  const families = process.env["CHAOS_FAMILIES"] === "evm" ? ["evm"] : ["evm", "others"];
  return { seed, minutes, faults: faults as FaultKind[], out, families };
}

async function main(): Promise<number> {
  const { seed, minutes, faults, out, families } = settings();
  const runMs = Math.round(minutes * 60_000);
  mkdirSync(out, { recursive: true });
  say(
    `chaos: seed ${seed} (CHAOS_SEED=${seed} runs this scenario again), ${minutes} min of traffic`,
  );
  const random = seededRandom(seed);
  const history = new History();
  const cleanup: (() => Promise<unknown>)[] = [];
  const stopAll = async () => {
    for (const stop of cleanup.reverse()) await stop().catch(() => undefined);
  };
  try {
    say("chaos: starting PostgreSQL and Redis…");
    const postgres = await startPostgres();
    cleanup.push(() => postgres.stop());
    const redis = await startRedis();
    cleanup.push(() => redis.stop());

    // The runner's own connection, for accounts and the checks. Migrated
    // here, so the replicas start on a ready schema.
    const migrated = await openMigratedDb({ databaseUrl: postgres.url, poolSize: 2 });
    await migrated.close();
    let opened: OpenedDb = await openDb({ databaseUrl: postgres.url, poolSize: 4 });
    cleanup.push(() => opened.close());

    const webhooks = await startWebhookReceiver(seededRandom(seed + 1));
    cleanup.push(() => webhooks.close());
    const accounts: { id: string; apiKey: string }[] = [];
    for (let i = 0; i < ACCOUNTS; i++) {
      const account = await createAccount(opened.db, `chaos-${i}`);
      // A paid plan, so the quota is counted but never the limit.
      await opened.db
        .updateTable("accounts")
        .set({ plan: "pro" })
        .where("id", "=", account.id)
        .execute();
      const key = await createApiKey(opened.db, account.id, `chaos-${i}`);
      const endpoint = await setWebhookEndpoint(
        opened.db,
        account.id,
        `${webhooks.url}/account-${i}`,
        { allowPrivateTargets: true },
      );
      webhooks.secrets.set(`/account-${i}`, endpoint.secret);
      accounts.push({ id: account.id, apiKey: key.key });
    }

    let balancerUrl = "";
    const parts = (): StackParts => ({ url: balancerUrl, apiKey: accounts[0]!.apiKey });
    say("chaos: starting the chains (EVM on anvil, and every other family's ledger)…");
    const chains: ChaosChain[] = [];
    chains.push(...(await startEvmChains(parts)));
    if (families.includes("others")) chains.push(...(await startLedgerChains(parts)));
    cleanup.push(() => Promise.all(chains.map((c) => c.stop())));

    const logs = createWriteStream(join(out, `service-${seed}.log`));
    cleanup.push(() => new Promise((r) => logs.end(r)));
    const env: Record<string, string> = {
      FACILITATOR_MODE: "production",
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      LOG_LEVEL: "warn",
      SETTLE_TIMEOUT_MS: String(SETTLE_TIMEOUT_MS),
      RECONCILE_AFTER_MS: String(RECONCILE_AFTER_MS),
      WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
      TRUST_PROXY: "true",
      RATE_LIMIT_MAX: "1000000",
      RATE_LIMIT_PLAN_PRO: "0",
      FAILED_SETTLES_PER_HOUR_PAID: "1000000",
      ...Object.assign({}, ...chains.map((c) => c.env)),
    };
    const crashes: string[] = [];
    const replicas = ["replica-a", "replica-b"].map((name) => {
      const replica = createReplica(
        name,
        env,
        (line) => logs.write(`${name} ${line}\n`),
        (code, signal, served) => {
          const what = `${name} exited by itself (${signal ?? `exit ${code}`})${served ? "" : " while starting"}`;
          // Refusing to start while a store or the chain is out of reach is
          // the start checks' design; ending while serving is a crash.
          if (served) crashes.push(what);
          history.record({ type: "fault", fault: "crash", detail: what });
          // As a supervisor does: start it again a moment later.
          setTimeout(() => {
            if (!replica.running) {
              replica.start().catch((e: unknown) => {
                history.record({ type: "fault", fault: "crash", detail: `${name}: ${String(e)}` });
              });
            }
          }, 1_000);
        },
      );
      return replica;
    });
    cleanup.push(() => Promise.all(replicas.map((r) => r.stop("SIGTERM"))));
    say("chaos: starting two service processes…");
    await Promise.all(replicas.map((r) => r.start()));
    const firstRss = replicas.map((r) => r.rssAtStart);
    const balancer = await startBalancer(replicas);
    cleanup.push(() => balancer.close());
    balancerUrl = balancer.url;
    const runnerRss = rssOf(process.pid);

    const traffic = new Traffic({
      url: balancer.url,
      apiKeys: accounts.map((a) => a.apiKey),
      families: chains.map((c) => c.traffic),
      history,
      random,
    });
    const outsideSends = new Set<string>();
    const schedule = faultSchedule(runMs, random, faults);
    const faultCounts: Record<string, number> = {};
    const start = Date.now();
    const faultLoop = (async () => {
      for (const { at, kind } of schedule) {
        const wait = start + at - Date.now();
        if (wait > 0) await sleep(wait);
        if (Date.now() - start > runMs) break;
        faultCounts[kind] = (faultCounts[kind] ?? 0) + 1;
        try {
          await injectFault(kind, {
            replicas,
            chains,
            postgres,
            redis,
            history,
            random,
            busy: () => traffic.busy,
            outsideSends,
          });
        } catch (e) {
          history.record({
            type: "fault",
            fault: kind,
            detail: `could not inject: ${e instanceof Error ? e.message : String(e)}`,
          });
        }
      }
    })();

    const progress = () => {
      const elapsed = Math.round((Date.now() - start) / 1000);
      const kinds = Object.entries(traffic.counts)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ");
      const injected = Object.values(faultCounts).reduce((a, b) => a + b, 0);
      say(
        `chaos: ${elapsed}s/${Math.round(runMs / 1000)}s  requests: ${kinds || "none yet"}  faults: ${injected}  in flight: ${traffic.busy}`,
      );
    };
    let lastProgress = Date.now();
    while (Date.now() - start < runMs) {
      if (traffic.busy < MAX_IN_FLIGHT) traffic.tick();
      await sleep(150 + random() * 250);
      if (Date.now() - lastProgress >= 5_000) {
        progress();
        lastProgress = Date.now();
      }
    }
    say("chaos: traffic stopped; waiting for the faults to end and retries to finish…");
    webhooks.flaky = false;
    await faultLoop;
    for (const r of replicas) if (!r.running) await r.start();
    for (const c of chains) c.rpc.mode = "pass";
    await traffic.drain(90_000);
    progress();

    // What was left pending is the reconciler's to finish, within its horizon.
    say("chaos: waiting for the reconciler and the webhook deliveries…");
    opened = await reopen(opened, postgres.url);
    const settledDeadline = Date.now() + HORIZON_MS + 90_000;
    for (;;) {
      const open = await opened.db
        .selectFrom("settlements")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("status", "=", "pending")
        .executeTakeFirstOrThrow();
      const undelivered = await opened.db
        .selectFrom("webhook_events")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("status", "=", "pending")
        .executeTakeFirstOrThrow();
      if ((Number(open.n) === 0 && Number(undelivered.n) === 0) || Date.now() > settledDeadline) {
        break;
      }
      if (Date.now() - lastProgress >= 10_000) {
        say(`chaos: ${open.n} settlements pending, ${undelivered.n} webhook events undelivered…`);
        lastProgress = Date.now();
      }
      await sleep(1_000);
    }

    const memory = [
      ...replicas.map((r, i) => ({
        name: `${r.name}${r.starts > 1 ? ` (start ${r.starts})` : ""}`,
        start: r.starts > 1 ? r.rssAtStart : firstRss[i],
        end: r.rss(),
      })),
      { name: "runner (chains)", start: runnerRss, end: rssOf(process.pid) },
    ];
    const results = await checkInvariants({
      db: opened.db,
      history,
      payments: traffic.payments,
      audits: chains.map((c) => c.audit),
      accountIds: accounts.map((a) => a.id),
      webhooks,
      outsideSends,
      horizonMs: HORIZON_MS,
      memory,
      memoryBound: MEMORY_BOUND,
    });

    results.push({
      name: "no service process crashed while serving",
      checked: `${replicas.reduce((n, r) => n + r.starts, 0)} process starts`,
      violations: crashes,
    });

    say("");
    say(`chaos report (seed ${seed}, ${minutes} min)`);
    say(
      `  requests: ${Object.entries(traffic.counts)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ")}`,
    );
    say(
      `  faults:   ${Object.entries(faultCounts)
        .map(([k, n]) => `${k} ${n}`)
        .join(", ")}`,
    );
    // Families on one chain share its proxy: reported once.
    for (const c of chains.filter((c, i) => chains.findIndex((o) => o.rpc === c.rpc) === i)) {
      const t = c.rpc.touched;
      say(
        `  ${c.name} RPC calls: ${t.pass} passed, ${t.delay} delayed, ${t.error} errors, ${t.blackhole} blackholed, ${t.drop} answers lost`,
      );
    }
    let violations = 0;
    for (const r of results) {
      violations += r.violations.length;
      say(`  ${r.violations.length === 0 ? "ok  " : "FAIL"} ${r.name}: ${r.checked}`);
      for (const v of r.violations.slice(0, 10)) say(`         ${v}`);
      if (r.violations.length > 10) say(`         … and ${r.violations.length - 10} more`);
    }
    const file = join(out, `history-${seed}.jsonl`);
    history.write(file, {
      seed,
      minutes,
      faults,
      results: results.map((r) => ({ ...r })),
    });
    say(`  history: ${file}`);
    say(violations === 0 ? "chaos: all invariants held" : `chaos: ${violations} violations`);
    return violations === 0 ? 0 : 1;
  } finally {
    await stopAll();
  }
}

/** The runner's pool may hold connections cut by the PostgreSQL restart: start afresh. */
async function reopen(opened: OpenedDb, url: string): Promise<OpenedDb> {
  await opened.close().catch(() => undefined);
  return openDb({ databaseUrl: url, poolSize: 4 });
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    say(
      e instanceof MissingBinary ? e.message : `chaos: ${e instanceof Error ? e.stack : String(e)}`,
    );
    process.exit(e instanceof MissingBinary ? 2 : 1);
  },
);
