/**
 * Sign-in through the configured identity providers, with `openid-client`:
 * authorization code flow with PKCE (S256), `state`, and for OpenID
 * providers a `nonce` and a verified ID token. GitHub speaks plain OAuth 2.0
 * (no ID token), so its user comes from its API: `/user` for the stable
 * numeric id, `/user/emails` for a verified email.
 *
 * Nothing here keeps state between the two legs: `begin` returns the
 * pending checks for the caller to keep (the HTTP layer puts them in a
 * short-lived HTTP-only cookie), and `complete` gets them back. So any
 * replica can finish a sign-in another one started.
 */
import * as oidc from "openid-client";
import type { AuthProviderConfig } from "../../config/auth.js";
import type { VerifiedIdentity } from "./identities.js";

export interface PendingSignIn {
  provider: string;
  state: string;
  nonce: string | undefined;
  codeVerifier: string;
  redirectUri: string;
  /** A path under /dashboard/ to land on afterwards. */
  returnTo: string;
}

/**
 * Why a sign-in did not finish, as the dashboard is told it: a fixed code
 * the sign-in page maps to its own fixed message (dashboard/src/SignInPage.tsx).
 * The URL of the dashboard carries the code only, never text from the
 * provider's redirect or an error message, so no one can make the genuine
 * dashboard show words of their choosing. The details go to the log.
 */
export type SignInErrorCode =
  /** The provider answered with an error: the user cancelled, or it refused. */
  | "cancelled"
  /** No sign-in under way in this browser for that provider (expired, or started elsewhere). */
  | "expired"
  | "unknown_provider"
  | "provider_unreachable"
  /** The provider's answer did not check out (state, PKCE, token, user API). */
  | "rejected";

export class SignInError extends Error {
  constructor(
    message: string,
    readonly reason: "unknown_provider" | "provider_unreachable" | "rejected",
  ) {
    super(message);
    this.name = "SignInError";
  }
}

function insecureAllowed(url: string): boolean {
  return new URL(url).protocol === "http:";
}

export class SignIn {
  private readonly byId: Map<string, AuthProviderConfig>;
  private readonly configurations = new Map<string, Promise<oidc.Configuration>>();

  constructor(providers: readonly AuthProviderConfig[]) {
    this.byId = new Map(providers.map((p) => [p.id, p]));
  }

  providers(): { id: string; label: string; kind: "oidc" | "github" }[] {
    return [...this.byId.values()].map((p) => ({ id: p.id, label: p.label, kind: p.kind }));
  }

  has(providerId: string): boolean {
    return this.byId.has(providerId);
  }

  async begin(
    providerId: string,
    redirectUri: string,
    returnTo: string,
  ): Promise<{ url: string; pending: PendingSignIn }> {
    const provider = this.provider(providerId);
    const config = await this.configuration(provider);
    const codeVerifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = provider.kind === "oidc" ? oidc.randomNonce() : undefined;
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope: provider.kind === "oidc" ? "openid email profile" : "read:user user:email",
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
      state,
      ...(nonce ? { nonce } : {}),
    });
    return {
      url: url.href,
      pending: { provider: providerId, state, nonce, codeVerifier, redirectUri, returnTo },
    };
  }

  /** Exchanges the code the provider sent back; checks state, PKCE and (OIDC) the ID token and nonce. */
  async complete(callbackUrl: URL, pending: PendingSignIn): Promise<VerifiedIdentity> {
    const provider = this.provider(pending.provider);
    const config = await this.configuration(provider);
    // The provider was told this redirect URI; the token request must name
    // the same one, whatever origin the callback arrived on.
    const current = new URL(pending.redirectUri);
    current.search = callbackUrl.search;
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
    try {
      tokens = await oidc.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: pending.state,
        ...(provider.kind === "oidc"
          ? { expectedNonce: pending.nonce, idTokenExpected: true }
          : {}),
      });
    } catch (e) {
      throw new SignInError(
        `the ${provider.label} sign-in was not accepted: ${message(e)}`,
        "rejected",
      );
    }
    if (provider.kind === "oidc") {
      const claims = tokens.claims();
      if (!claims) throw new SignInError(`${provider.label} sent no ID token`, "rejected");
      const email =
        typeof claims["email"] === "string" && claims["email_verified"] !== false
          ? claims["email"]
          : null;
      return {
        issuer: claims.iss,
        subject: claims.sub,
        provider: provider.id,
        email,
        name: typeof claims["name"] === "string" ? claims["name"] : null,
      };
    }
    return this.githubUser(provider, config, tokens.access_token);
  }

  private async githubUser(
    provider: AuthProviderConfig,
    config: oidc.Configuration,
    accessToken: string,
  ): Promise<VerifiedIdentity> {
    const api = provider.apiUrl ?? "https://api.github.com";
    const get = async (path: string): Promise<unknown> => {
      const headers = new Headers({ accept: "application/vnd.github+json" });
      const res = await oidc.fetchProtectedResource(
        config,
        accessToken,
        new URL(`${api}${path}`),
        "GET",
        undefined,
        headers,
      );
      if (!res.ok) throw new SignInError(`GitHub ${path} answered ${res.status}`, "rejected");
      return res.json();
    };
    const user = (await get("/user")) as { id?: unknown; login?: unknown; name?: unknown };
    if (typeof user.id !== "number" && typeof user.id !== "string")
      throw new SignInError("GitHub /user has no id", "rejected");
    const emails = (await get("/user/emails").catch(() => [])) as {
      email?: unknown;
      verified?: unknown;
      primary?: unknown;
    }[];
    const verified = Array.isArray(emails) ? emails.filter((e) => e.verified === true) : [];
    const chosen = verified.find((e) => e.primary === true) ?? verified[0];
    return {
      issuer: provider.issuer,
      subject: String(user.id),
      provider: provider.id,
      email: typeof chosen?.email === "string" ? chosen.email : null,
      name:
        typeof user.name === "string"
          ? user.name
          : typeof user.login === "string"
            ? user.login
            : null,
    };
  }

  private provider(id: string): AuthProviderConfig {
    const p = this.byId.get(id);
    if (!p) throw new SignInError(`no sign-in provider "${id}"`, "unknown_provider");
    return p;
  }

  /** Discovery once per provider; a failed one is retried on the next sign-in. */
  private configuration(p: AuthProviderConfig): Promise<oidc.Configuration> {
    let found = this.configurations.get(p.id);
    if (!found) {
      found = this.load(p).catch((e: unknown) => {
        this.configurations.delete(p.id);
        throw new SignInError(
          `cannot reach the ${p.label} sign-in (${message(e)}); try again shortly`,
          "provider_unreachable",
        );
      });
      this.configurations.set(p.id, found);
    }
    return found;
  }

  private async load(p: AuthProviderConfig): Promise<oidc.Configuration> {
    const insecure = insecureAllowed(p.issuer) || insecureAllowed(p.tokenUrl ?? p.issuer);
    if (p.kind === "oidc") {
      return oidc.discovery(new URL(p.issuer), p.clientId, p.clientSecret, undefined, {
        ...(insecure ? { execute: [oidc.allowInsecureRequests] } : {}),
      });
    }
    const config = new oidc.Configuration(
      {
        issuer: p.issuer,
        authorization_endpoint: p.authorizationUrl!,
        token_endpoint: p.tokenUrl!,
      },
      p.clientId,
      p.clientSecret,
    );
    if (insecure || insecureAllowed(p.apiUrl ?? "https://x")) oidc.allowInsecureRequests(config);
    return config;
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
