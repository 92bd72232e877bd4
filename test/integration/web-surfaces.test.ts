/**
 * The service's own web surfaces against a browser, a proxy or a curious
 * account: hardening headers on every response, no caching of anything that
 * carries a key, a secret or a session, HSTS only behind https, sign-in
 * errors as fixed codes, webhook refusals that say nothing of internal DNS,
 * a /ready that tells a load balancer what is down without raw error text,
 * and a /metrics that can require a bearer token.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { sql } from "kysely";
import { startStack, type TestStack } from "../support/stack.js";
import { availableBackends } from "../support/database.js";
import { signedInUser, type DashboardUser } from "../support/dashboardSession.js";
import { post } from "../support/http.js";
import { until } from "../support/processes.js";

const METRICS_TOKEN = "metrics-scraper-token-0123456789abcdef";

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

function assertHardened(res: Response, what: string): void {
  assert.equal(res.headers.get("x-content-type-options"), "nosniff", what);
  assert.equal(res.headers.get("referrer-policy"), "no-referrer", what);
  assert.equal(res.headers.get("x-frame-options"), "DENY", what);
  assert.match(res.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/, what);
}

describe("web surfaces behind https, with a metrics token", () => {
  let stack: TestStack;
  let user: DashboardUser;

  before(async () => {
    stack = await startStack({
      env: { PUBLIC_URL: "https://facilitator.example", METRICS_TOKEN },
    });
    user = await signedInUser(stack.service.db, stack.url);
  });
  after(() => stack.stop());

  test("every response carries nosniff, a referrer policy, no framing, a CSP and HSTS", async () => {
    const responses: [string, Response][] = [
      ["GET /health", await fetch(`${stack.url}/health`)],
      ["GET /supported", await fetch(`${stack.url}/supported`)],
      ["POST /verify without a key", await post(stack.url, "/verify", {})],
      ["GET /nowhere", await fetch(`${stack.url}/nowhere`)],
      ["GET /api/session", await user.call("/api/session")],
      ["GET /api/keys without a session", await fetch(`${stack.url}/api/keys`)],
      ["GET /discovery/resources", await fetch(`${stack.url}/discovery/resources`)],
      ["GET /dashboard/", await fetch(`${stack.url}/dashboard/`)],
      ["GET /dashboard/keys", await fetch(`${stack.url}/dashboard/keys`)],
    ];
    for (const [what, res] of responses) {
      assertHardened(res, what);
      assert.equal(
        res.headers.get("strict-transport-security"),
        "max-age=31536000",
        `${what}: HSTS, since PUBLIC_URL is https`,
      );
    }
    // The API answers JSON only: nothing may load or run from it.
    assert.match(
      responses[0]![1].headers.get("content-security-policy")!,
      /^default-src 'none'/,
      "an API response",
    );
  });

  test("the dashboard's CSP loads only its own files, with no inline script or style", async () => {
    const page = await fetch(`${stack.url}/dashboard/`);
    assert.equal(page.status, 200);
    const html = await page.text();
    const csp = page.headers.get("content-security-policy") ?? "";
    const directives = new Map(
      csp.split(";").map((d) => {
        const [name, ...values] = d.trim().split(/\s+/);
        return [name!, values.join(" ")];
      }),
    );
    assert.equal(directives.get("default-src"), "'self'");
    assert.equal(directives.get("script-src"), "'self'");
    assert.equal(directives.get("style-src"), "'self'");
    assert.equal(directives.get("frame-ancestors"), "'none'");
    assert.equal(directives.get("object-src"), "'none'");
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    // Which the built page can live with: no inline script or style at all.
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline script");
    assert.doesNotMatch(html, /<style|\sstyle=/, "no inline style");
    for (const src of html.matchAll(/(?:src|href)="([^"]+)"/g)) {
      assert.match(src[1]!, /^\/dashboard\//, "every file from this origin");
      const asset = await fetch(`${stack.url}${src[1]}`);
      assert.equal(asset.status, 200, src[1]);
      assertHardened(asset, src[1]!);
    }
  });

  test("responses that carry a key, a secret, a session or its CSRF token are never stored", async () => {
    const session = await user.call("/api/session");
    assert.equal(session.status, 200);
    assert.equal(typeof (await json(session))["csrfToken"], "string");
    const key = await user.call("/api/keys", { method: "POST", body: { name: "no-store" } });
    assert.equal(key.status, 201);
    assert.match(String((await json(key))["key"]), /^x402_sk_/);
    const hook = await user.call("/api/webhooks", {
      method: "PUT",
      body: { url: "https://8.8.8.8/hooks" },
    });
    assert.equal(hook.status, 200);
    assert.match(String((await json(hook))["secret"]), /^whsec_/);
    const rotated = await user.call("/api/webhooks/secret", { method: "POST" });
    assert.equal(rotated.status, 200);
    assert.match(String((await json(rotated))["secret"]), /^whsec_/);
    const callback = await fetch(`${stack.url}/auth/callback/github?code=x&state=y`, {
      redirect: "manual",
    });
    assert.equal(callback.status, 303);
    for (const [what, res] of [
      ["GET /api/session", session],
      ["POST /api/keys", key],
      ["PUT /api/webhooks", hook],
      ["POST /api/webhooks/secret", rotated],
      ["GET /auth/callback", callback],
    ] as const) {
      assert.equal(res.headers.get("cache-control"), "no-store", what);
    }
  });

  test("sign-in errors reach the dashboard as fixed codes, never as text from the URL", async () => {
    const injected = "Your account is locked: call +1-555-0100 or visit evil.example";
    const cases: [string, string][] = [
      [
        `/auth/callback/github?error=access_denied&error_description=${encodeURIComponent(injected)}`,
        "cancelled",
      ],
      [`/auth/callback/github?error=${encodeURIComponent(injected)}`, "cancelled"],
      ["/auth/callback/github?code=x&state=y", "expired"],
    ];
    for (const [path, code] of cases) {
      const res = await fetch(`${stack.url}${path}`, { redirect: "manual" });
      assert.equal(res.status, 303, path);
      assert.equal(res.headers.get("location"), `/dashboard/?signInError=${code}`, path);
    }
  });

  test("a webhook host that is or resolves to a private address is refused without saying what it resolved to", async () => {
    const endpoint = () =>
      stack.service.db
        .selectFrom("webhook_endpoints")
        .select("url")
        .where("account_id", "=", user.accountId)
        .executeTakeFirst();
    const saved = await endpoint();
    for (const url of [
      "http://localhost:9/hooks",
      "http://10.0.3.7/hooks",
      "http://[::1]/hooks",
      "http://no-such-host.invalid/hooks",
    ]) {
      const res = await user.call("/api/webhooks", { method: "PUT", body: { url } });
      assert.equal(res.status, 400, url);
      const body = await json(res);
      assert.equal(body["error"], "invalid_request", url);
      // The host as written is echoed back; nothing learnt from DNS is.
      const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
      const message = String(body["message"]).replace(host, "HOST");
      assert.match(message, /^HOST is not allowed/, url);
      assert.doesNotMatch(message, /127\.0\.0\.1|::1|resolves to|ENOTFOUND|getaddrinfo/, url);
      assert.deepEqual(await endpoint(), saved, `${url}: nothing saved`);
    }
  });

  test("/metrics needs the bearer token, checked before anything is read", async () => {
    for (const authorization of [
      undefined,
      "Bearer wrong-token",
      `Bearer ${METRICS_TOKEN}x`,
      METRICS_TOKEN,
      `Basic ${METRICS_TOKEN}`,
    ]) {
      const res = await fetch(`${stack.url}/metrics`, {
        headers: authorization ? { authorization } : {},
      });
      assert.equal(res.status, 401, String(authorization));
      assert.equal(res.headers.get("www-authenticate"), "Bearer");
      const body = await json(res);
      assert.equal(body["error"], "unauthorized");
      assert.match(String(body["requestId"]), /^req_/);
      assert.doesNotMatch(JSON.stringify(body), /x402_/, "no metric in the refusal");
    }
    const ok = await fetch(`${stack.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    assert.equal(ok.status, 200);
    assert.match(await ok.text(), /x402_http_request_duration_seconds/);
  });
});

describe("web surfaces over plain http, Redis away", () => {
  let stack: TestStack;

  before(async () => {
    stack = await startStack({
      env: { REDIS_URL: `redis://ops:hunter2-password@127.0.0.1:${await closedPort()}` },
    });
  });
  after(() => stack.stop());

  test("no HSTS without an https PUBLIC_URL; the other headers stay", async () => {
    for (const path of ["/health", "/dashboard/", "/ready"]) {
      const res = await fetch(`${stack.url}${path}`);
      assertHardened(res, path);
      assert.equal(res.headers.get("strict-transport-security"), null, path);
    }
  });

  test("/metrics is open when no METRICS_TOKEN is set", async () => {
    const res = await fetch(`${stack.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /x402_/);
  });

  test("/ready names what is down, with per-network flags, and no raw error text or RPC host", async () => {
    const res = await fetch(`${stack.url}/ready`);
    assert.equal(res.status, 503);
    const body = (await res.json()) as {
      error: string;
      message: string;
      ready: boolean;
      database: Record<string, unknown>;
      redis: Record<string, unknown>;
      networks: Record<string, unknown>[];
    };
    assert.equal(body.error, "service_unavailable");
    assert.equal(body.message, "not ready: Redis unreachable");
    assert.equal(body.ready, false);
    assert.deepEqual(body.database, { ok: true });
    assert.deepEqual(body.redis, { ok: false });
    assert.deepEqual(body.networks, [{ network: stack.network, reachable: true }]);
    const text = JSON.stringify(body);
    for (const secret of ["hunter2", "ops", "127.0.0.1", "Stream", "ECONNREFUSED", "http"]) {
      assert.ok(!text.includes(secret), `no ${secret} in ${text}`);
    }
  });
});

// A database error's text names hosts, users and databases; only a server
// database can be made to fail under a running service.
if (availableBackends().includes("postgres")) {
  describe("/ready while the database refuses connections (postgres)", () => {
    let stack: TestStack;
    let admin: pg.Client;
    let name: string;

    before(async () => {
      stack = await startStack({ backend: "postgres" });
      admin = new pg.Client({ connectionString: process.env["TEST_DATABASE_URL"] });
      await admin.connect();
      const current = await sql<{ name: string }>`SELECT current_database() AS name`.execute(
        stack.service.db,
      );
      name = current.rows[0]?.name ?? "";
      assert.match(name, /^x402_test_/);
    });
    after(async () => {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      await admin.end();
      await stack.stop();
    });

    test("503 with database.ok false and none of the driver's message", async () => {
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
        [name],
      );
      // The pool notices its connections are gone on the next query (and
      // /ready keeps its answer about a second).
      const body = await until("/ready to say the database is unreachable", async () => {
        const res = await fetch(`${stack.url}/ready`);
        const b = await json(res);
        return res.status === 503 && (b["database"] as { ok: boolean }).ok === false
          ? b
          : undefined;
      });
      assert.deepEqual(body["database"], { ok: false });
      assert.match(String(body["message"]), /^not ready: the database unreachable$/);
      const text = JSON.stringify(body);
      for (const secret of [name, "accepting connections", "terminat", "postgres"]) {
        assert.ok(!text.includes(secret), `no ${secret} in ${text}`);
      }
      await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    });
  });
}
