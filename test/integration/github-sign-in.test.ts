/**
 * Sign-in with GitHub, which speaks plain OAuth 2.0 (no ID token): the
 * authorization code flow with PKCE and `state`, then the identity from
 * GitHub's REST API (`/user`, and the verified primary address from
 * `/user/emails`). GitHub cannot run here, so a loopback stand-in plays its
 * three endpoints and refuses what GitHub refuses: a wrong client secret, a
 * code used twice, a PKCE verifier that does not match the challenge, and an
 * API call without the token it issued.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignIn, SignInError } from "../../src/features/identity/signIn.js";

interface Grant {
  challenge: string;
  redirectUri: string;
  used: boolean;
}

describe("sign-in with GitHub (OAuth 2.0 and its user API)", () => {
  let server: Server;
  let base: string;
  const grants = new Map<string, Grant>();
  const tokens = new Set<string>();
  let emails: unknown[] = [];

  before(async () => {
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", base);
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (url.pathname === "/login/oauth/authorize") {
        // The user approves at once: back to the app with a code and the state.
        assert.equal(url.searchParams.get("code_challenge_method"), "S256");
        const code = randomBytes(8).toString("hex");
        grants.set(code, {
          challenge: url.searchParams.get("code_challenge") ?? "",
          redirectUri: url.searchParams.get("redirect_uri") ?? "",
          used: false,
        });
        const back = new URL(url.searchParams.get("redirect_uri")!);
        back.searchParams.set("code", code);
        back.searchParams.set("state", url.searchParams.get("state") ?? "");
        res.writeHead(302, { location: back.href });
        res.end();
        return;
      }
      if (url.pathname === "/login/oauth/access_token" && req.method === "POST") {
        let body = "";
        req.on("data", (c: Buffer) => (body += c.toString()));
        req.on("end", () => {
          const form = new URLSearchParams(body);
          const basic = Buffer.from(
            (req.headers.authorization ?? "").replace(/^Basic /, ""),
            "base64",
          ).toString();
          // Client authentication in the header (basic) or the body (post), as GitHub allows.
          const [id, secret] = basic
            ? basic.split(":").map(decodeURIComponent)
            : [form.get("client_id"), form.get("client_secret")];
          const clientOk = id === "gh-client" && secret === "gh-secret";
          const grant = grants.get(form.get("code") ?? "");
          const verifier = form.get("code_verifier") ?? "";
          const pkceOk =
            grant !== undefined &&
            createHash("sha256").update(verifier).digest("base64url") === grant.challenge;
          if (!clientOk) return json(401, { error: "incorrect_client_credentials" });
          if (!grant || grant.used || !pkceOk || form.get("redirect_uri") !== grant.redirectUri)
            return json(400, { error: "bad_verification_code" });
          grant.used = true;
          const token = `gho_${randomBytes(12).toString("hex")}`;
          tokens.add(token);
          json(200, { access_token: token, token_type: "bearer", scope: "read:user,user:email" });
        });
        return;
      }
      const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
      if (!tokens.has(token)) return json(401, { message: "Bad credentials" });
      if (url.pathname === "/user") return json(200, { id: 583231, login: "octocat", name: null });
      if (url.pathname === "/user/emails") return json(200, emails);
      json(404, { message: "Not Found" });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const signIn = (secret = "gh-secret") =>
    new SignIn([
      {
        id: "github",
        label: "GitHub",
        kind: "github",
        issuer: "https://github.com",
        clientId: "gh-client",
        clientSecret: secret,
        authorizationUrl: `${base}/login/oauth/authorize`,
        tokenUrl: `${base}/login/oauth/access_token`,
        apiUrl: base,
      },
    ]);
  const redirectUri = "http://127.0.0.1:4999/auth/callback/github";

  /** Runs the browser's part: follow the authorization URL to the callback. */
  const approve = async (url: string) => {
    const res = await fetch(url, { redirect: "manual" });
    assert.equal(res.status, 302);
    return new URL(res.headers.get("location")!);
  };

  test("the code flow with PKCE yields GitHub's user id and its verified primary address", async () => {
    emails = [
      { email: "unverified@example.com", verified: false, primary: false },
      { email: "second@example.com", verified: true, primary: false },
      { email: "octocat@example.com", verified: true, primary: true },
    ];
    const flow = signIn();
    const { url, pending } = await flow.begin("github", redirectUri, "/dashboard/");
    assert.match(url, /code_challenge=/);
    assert.match(url, /scope=read%3Auser(\+|%20)user%3Aemail/);
    const identity = await flow.complete(await approve(url), pending);
    assert.deepEqual(identity, {
      issuer: "https://github.com",
      subject: "583231",
      provider: "github",
      email: "octocat@example.com",
      name: "octocat",
    });
  });

  test("no verified address: the identity has none rather than an unverified one", async () => {
    emails = [{ email: "unverified@example.com", verified: false, primary: true }];
    const flow = signIn();
    const { url, pending } = await flow.begin("github", redirectUri, "/dashboard/");
    const identity = await flow.complete(await approve(url), pending);
    assert.equal(identity.email, null);
    assert.equal(identity.subject, "583231");
  });

  test("a state that does not match, a code used twice, a wrong secret: each refused", async () => {
    const flow = signIn();
    const { url, pending } = await flow.begin("github", redirectUri, "/dashboard/");
    const callback = await approve(url);
    const forged = new URL(callback);
    forged.searchParams.set("state", "not-the-state");
    await assert.rejects(flow.complete(forged, pending), SignInError);
    await flow.complete(callback, pending);
    await assert.rejects(flow.complete(callback, pending), SignInError);

    const wrong = signIn("not-the-secret");
    const second = await wrong.begin("github", redirectUri, "/dashboard/");
    await assert.rejects(wrong.complete(await approve(second.url), second.pending), SignInError);

    // Another sign-in's PKCE verifier does not redeem this one's code.
    const a = await flow.begin("github", redirectUri, "/dashboard/");
    const b = await flow.begin("github", redirectUri, "/dashboard/");
    await assert.rejects(
      flow.complete(await approve(a.url), { ...a.pending, codeVerifier: b.pending.codeVerifier }),
      SignInError,
    );
  });
});
