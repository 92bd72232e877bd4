/**
 * The Grafana dashboard against a real Prometheus: the service on the
 * devnet, a Prometheus server (Debian's package) scraping it every second,
 * some traffic (verifies, settles, a replayed settle refused, a bad body,
 * webhooks delivered), then every panel's query, its variables filled in as
 * Grafana fills them, must return data through Prometheus' HTTP API, and
 * every variable's label_values must list something. The same Prometheus
 * loads the alert rules, which must evaluate without error on the live
 * series.
 *
 * Skipped with a message where /usr/bin/prometheus is missing, except in CI
 * (.ci/run installs it).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Hex } from "viem";
import { startStack, type TestStack } from "../support/stack.js";
import { requirementsFor, signPayment, usdcBalance } from "../chains/evm/payments.js";
import { post } from "../support/http.js";
import { freePort, signalAndWait, until } from "../support/processes.js";
import { setWebhookEndpoint } from "../../src/features/webhooks/webhookRepository.js";

const PROMETHEUS = "/usr/bin/prometheus";
const JOB = "x402-facilitator";
const PAY_TO = "0x7777777777777777777777777777777777777777" as Hex;
/** How Grafana fills the variables: every job, instance and network ("All"). */
const VARIABLES: Record<string, string> = {
  job: JOB,
  instance: ".+",
  network: ".+",
  // Wide enough to span the whole test at a 1 s scrape.
  __rate_interval: "1m",
};

interface Target {
  expr: string;
  refId: string;
  datasource?: { uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: string | { query: string } }[] };
}

const dashboard = JSON.parse(
  readFileSync("deploy/grafana/x402-facilitator.json", "utf8"),
) as Dashboard;
const queried = dashboard.panels.filter((p) => p.type !== "row");

function fill(expr: string): string {
  return expr.replace(/\$\{?(\w+)\}?/g, (whole, name: string) => VARIABLES[name] ?? whole);
}

const installed = existsSync(PROMETHEUS);
if (!installed && process.env["CI"])
  throw new Error(
    `CI is set but ${PROMETHEUS} is missing: .ci/run installs the prometheus package`,
  );
const skip = installed
  ? false
  : `${PROMETHEUS} is not installed (Debian package \`prometheus\`): the dashboard check is skipped`;

describe("the Grafana dashboard", () => {
  test("is provisioning-ready: one data-source variable, every panel and query on it", () => {
    const ds = dashboard.templating.list.find((v) => v.name === "DS_PROMETHEUS");
    assert.equal(ds?.type, "datasource");
    assert.equal(ds.query, "prometheus");
    assert.equal(dashboard.uid, "x402-facilitator");
    const ids = dashboard.panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, "panel ids are unique");
    assert.ok(queried.length >= 15, `${queried.length} panels`);
    for (const panel of queried) {
      assert.equal(panel.datasource?.uid, "${DS_PROMETHEUS}", `${panel.title}: its data source`);
      assert.ok(panel.targets?.length, `${panel.title} has no query`);
      for (const t of panel.targets)
        assert.equal(t.datasource?.uid, "${DS_PROMETHEUS}", `${panel.title} ${t.refId}`);
    }
  });

  describe("against a real Prometheus scraping the service", { skip }, () => {
    let stack: TestStack;
    let prometheus: ChildProcess | undefined;
    let promUrl: string;
    let dir: string;
    let receiver: http.Server;
    let delivered = 0;
    let prometheusLog = "";

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "dashboard-prometheus-"));
      receiver = http.createServer((req, res) => {
        req.resume();
        req.on("end", () => {
          delivered++;
          res.writeHead(204).end();
        });
      });
      await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
      stack = await startStack({
        env: { WEBHOOK_ALLOW_PRIVATE_TARGETS: "true" },
        collectProcessMetrics: true,
      });
      await setWebhookEndpoint(
        stack.service.db,
        stack.accountId,
        `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
        { allowPrivateTargets: true },
      );
      const port = await freePort();
      promUrl = `http://127.0.0.1:${port}`;
      writeFileSync(
        join(dir, "prometheus.yml"),
        [
          "global: { scrape_interval: 1s, evaluation_interval: 1s }",
          `rule_files: ["${resolve("deploy/prometheus/alerts.yml")}"]`,
          "scrape_configs:",
          `  - job_name: ${JOB}`,
          `    static_configs: [{ targets: ["${new URL(stack.url).host}"] }]`,
          "",
        ].join("\n"),
      );
      prometheus = spawn(
        PROMETHEUS,
        [
          `--config.file=${join(dir, "prometheus.yml")}`,
          `--storage.tsdb.path=${join(dir, "data")}`,
          `--web.listen-address=127.0.0.1:${port}`,
          "--log.level=warn",
        ],
        { stdio: ["ignore", "pipe", "pipe"] },
      );
      prometheus.stdout!.on("data", (c: Buffer) => (prometheusLog += c.toString()));
      prometheus.stderr!.on("data", (c: Buffer) => (prometheusLog += c.toString()));
      await until(
        "Prometheus to be ready",
        async () => (await fetch(`${promUrl}/-/ready`)).ok,
        60_000,
      ).catch((e: Error) => {
        throw new Error(`${e.message}:\n${prometheusLog}`);
      });
    });

    after(async () => {
      if (prometheus) await signalAndWait(prometheus, "SIGTERM");
      await stack?.stop();
      receiver?.closeAllConnections();
      await new Promise((r) => receiver?.close(r));
      rmSync(dir, { recursive: true, force: true });
    });

    async function query(
      expr: string,
    ): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
      const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
      const body = (await res.json()) as {
        status: string;
        error?: string;
        data?: { result: { metric: Record<string, string>; value: [number, string] }[] };
      };
      if (body.status !== "success") throw new Error(`${expr}: ${body.error}`);
      return body.data!.result;
    }

    /** A verify and a settle of a fresh payment by payer `n`; the payment's body. */
    async function pay(n: number) {
      const requirements = requirementsFor({
        network: stack.network,
        usdc: stack.usdc,
        payTo: PAY_TO,
      });
      const body = {
        x402Version: 2,
        paymentPayload: await signPayment(stack.payerKeys[n]!, requirements),
        paymentRequirements: requirements,
      };
      const verified = (await (await post(stack.url, "/verify", body, stack.apiKey)).json()) as {
        isValid: boolean;
      };
      assert.equal(verified.isValid, true);
      const settled = (await (await post(stack.url, "/settle", body, stack.apiKey)).json()) as {
        success: boolean;
      };
      assert.equal(settled.success, true);
      return body;
    }

    test("traffic: verifies, settles, a refused replay, a bad body, webhooks", async () => {
      const before = await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO);
      const first = await pay(0);
      const replay = (await (await post(stack.url, "/settle", first, stack.apiKey)).json()) as {
        success: boolean;
      };
      assert.equal(replay.success, false, "a replayed payment is refused");
      assert.equal((await post(stack.url, "/settle", "{", stack.apiKey)).status, 400);
      await until("the first webhook's delivery", async () => delivered >= 1, 60_000);
      // A series is first scraped at the value it was born with, so a rate needs
      // a second round once Prometheus has seen the first: as on any live service.
      await until(
        "Prometheus to scrape the first round",
        async () =>
          (await query(`x402_webhook_deliveries_total{job="${JOB}"}`)).length > 0 &&
          (await query(`x402_transaction_phase_seconds_count{job="${JOB}"}`)).length > 0,
        60_000,
      );
      await pay(1);
      await until("the second webhook's delivery", async () => delivered >= 2, 60_000);
      assert.equal(
        await usdcBalance(stack.rpcUrl, stack.usdc, PAY_TO),
        before + 2n * BigInt(first.paymentRequirements.amount),
        "two transfers, the replay none",
      );
      const rows = await stack.service.db
        .selectFrom("settlements")
        .select("status")
        .where("account_id", "=", stack.accountId)
        .where("status", "=", "succeeded")
        .execute();
      assert.equal(rows.length, 2);
    });

    test("every panel's query returns data", async () => {
      const targets = queried.flatMap((p) =>
        (p.targets ?? []).map((t) => ({ panel: p.title, refId: t.refId, expr: fill(t.expr) })),
      );
      const pending = new Map(targets.map((t) => [`${t.panel} ${t.refId}`, t]));
      const empty = new Map<string, string>();
      // Scrapes come every second; poll until every query has a finite value, within a generous bound.
      const deadline = Date.now() + 60_000;
      while (pending.size > 0 && Date.now() < deadline) {
        for (const [key, t] of pending) {
          const result = await query(t.expr);
          if (result.some((r) => Number.isFinite(Number(r.value[1])))) {
            pending.delete(key);
            empty.delete(key);
          } else empty.set(key, `${t.expr} -> ${JSON.stringify(result)}`);
        }
        if (pending.size > 0) await new Promise((r) => setTimeout(r, 500));
      }
      console.log(
        `${targets.length - pending.size} of ${targets.length} panel queries returned data`,
      );
      assert.deepEqual([...empty.entries()], [], "queries without data");
    });

    test("every variable lists values", async () => {
      for (const v of dashboard.templating.list.filter((x) => x.type === "query")) {
        const q = typeof v.query === "string" ? v.query : v.query.query;
        const m = /^label_values\((.*),\s*(\w+)\)$/.exec(q);
        assert.ok(m, `${v.name}: ${q}`);
        const res = await fetch(
          `${promUrl}/api/v1/label/${m[2]}/values?match[]=${encodeURIComponent(fill(m[1]!))}`,
        );
        const values = ((await res.json()) as { data: string[] }).data;
        assert.ok(values.length > 0, `${v.name} lists nothing`);
        if (v.name === "network") assert.ok(values.includes(stack.network), `${values}`);
      }
    });

    test("the alert rules load and evaluate on the live series", async () => {
      const body = (await (await fetch(`${promUrl}/api/v1/rules?type=alert`)).json()) as {
        data: {
          groups: {
            rules: { name: string; health: string; lastError?: string; state: string }[];
          }[];
        };
      };
      const rules = body.data.groups.flatMap((g) => g.rules);
      assert.equal(rules.length, 9);
      await until("every rule evaluated", async () => {
        const now = (await (
          await fetch(`${promUrl}/api/v1/rules?type=alert`)
        ).json()) as typeof body;
        const all = now.data.groups.flatMap((g) => g.rules);
        return all.every((r) => r.health === "ok") && all;
      }).then((all) => {
        for (const r of all) assert.equal(r.lastError ?? "", "", r.name);
        // A healthy devnet fires nothing.
        assert.deepEqual(
          all.filter((r) => r.state === "firing").map((r) => r.name),
          [],
        );
      });
    });
  });
});
