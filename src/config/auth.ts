/**
 * Dashboard sign-in configuration, from the environment:
 *
 * - `AUTH_PROVIDERS`: comma-separated provider ids, e.g. `google,github`.
 *   Empty: the dashboard offers no sign-in (devnet mode starts its own).
 * - per provider `<ID>` (upper case):
 *   - `AUTH_<ID>_KIND`: `oidc` (any OpenID Connect provider) or `github`
 *     (OAuth 2.0 and GitHub's user API). Default: `github` for the id
 *     `github`, `oidc` otherwise.
 *   - `AUTH_<ID>_ISSUER`: the issuer URL (OpenID discovery runs against it).
 *     GitHub: used only as the identity's issuer; default `https://github.com`
 *     with GitHub's own API, else the origin of `AUTH_<ID>_API_URL`, so a
 *     GitHub Enterprise user never shares an identity with the github.com
 *     user of the same numeric id.
 *   - `AUTH_<ID>_CLIENT_ID`, `AUTH_<ID>_CLIENT_SECRET` (or `_FILE`).
 *   - `AUTH_<ID>_LABEL`: the button's text (default: the id, capitalised).
 *   - GitHub only: `AUTH_<ID>_AUTHORIZATION_URL`, `AUTH_<ID>_TOKEN_URL`,
 *     `AUTH_<ID>_API_URL` (GitHub Enterprise, or a loopback double in tests).
 * - `PUBLIC_URL`: the service's public origin; redirect URIs are
 *   `<PUBLIC_URL>/auth/callback/<id>`. Required in production when a
 *   provider is configured; devnet uses the request's loopback origin.
 * - `SESSION_TTL_HOURS`: how long a dashboard session lasts (default 12).
 * - `DASHBOARD_DIR`: the built dashboard served under /dashboard/
 *   (default `dashboard/dist`).
 */
import { ConfigError } from "../lib/configError.js";
import type { ConfigVariable } from "../lib/envVars.js";

export interface AuthProviderConfig {
  id: string;
  label: string;
  kind: "oidc" | "github";
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** GitHub only. */
  authorizationUrl?: string | undefined;
  tokenUrl?: string | undefined;
  apiUrl?: string | undefined;
  /**
   * Never read from the environment: devnet mode sets it on its own local
   * providers. The name of the account whoever signs in through this
   * provider joins (created if none has it), instead of an account of their
   * own, so a devnet sign-in sees the account that owns the devnet's key.
   */
  joinsAccount?: string | undefined;
}

export interface AuthConfig {
  providers: readonly AuthProviderConfig[];
  publicUrl: string | undefined;
  sessionTtlMs: number;
  dashboardDir: string;
}

const ID = /^[a-z][a-z0-9-]{0,31}$/;
const GITHUB_ISSUER = "https://github.com";
const GITHUB_API = "https://api.github.com";

function isLoopback(url: URL): boolean {
  return ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname);
}

/** An http(s) URL; plain http only on loopback (the devnet's and tests' providers). */
function checkedUrl(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopback(url))) {
    throw new ConfigError(`${name} must be an https:// URL (http:// only on loopback)`);
  }
  return raw.replace(/\/$/, "");
}

export function parseAuthConfig(
  env: NodeJS.ProcessEnv,
  mode: "devnet" | "production",
  readSecret: (name: string) => string | undefined,
): AuthConfig {
  const ids = (env["AUTH_PROVIDERS"] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const providers = ids.map((id): AuthProviderConfig => {
    if (!ID.test(id))
      throw new ConfigError(`AUTH_PROVIDERS: "${id}" must be lower-case letters, digits and -`);
    const p = `AUTH_${id.toUpperCase().replace(/-/g, "_")}_`;
    const kindRaw = env[`${p}KIND`]?.trim() || (id === "github" ? "github" : "oidc");
    if (kindRaw !== "oidc" && kindRaw !== "github")
      throw new ConfigError(`${p}KIND must be oidc or github, got "${kindRaw}"`);
    const optionalUrl = (suffix: string) => {
      const v = env[`${p}${suffix}`]?.trim();
      return v ? checkedUrl(`${p}${suffix}`, v) : undefined;
    };
    const apiUrl = kindRaw === "github" ? (optionalUrl("API_URL") ?? GITHUB_API) : undefined;
    // A GitHub user id is unique within the GitHub that issued it, and the
    // API is where the id comes from: its host names the identity space.
    const githubIssuer = apiUrl === GITHUB_API ? GITHUB_ISSUER : apiUrl && new URL(apiUrl).origin;
    const issuerRaw = env[`${p}ISSUER`]?.trim() || githubIssuer || "";
    if (!issuerRaw) throw new ConfigError(`${p}ISSUER is required for the OpenID provider ${id}`);
    const clientId = env[`${p}CLIENT_ID`]?.trim();
    if (!clientId) throw new ConfigError(`${p}CLIENT_ID is required for the provider ${id}`);
    const clientSecret = readSecret(`${p}CLIENT_SECRET`)?.trim();
    if (!clientSecret)
      throw new ConfigError(`${p}CLIENT_SECRET (or ${p}CLIENT_SECRET_FILE) is required for ${id}`);
    return {
      id,
      label: env[`${p}LABEL`]?.trim() || id.charAt(0).toUpperCase() + id.slice(1),
      kind: kindRaw,
      issuer: checkedUrl(`${p}ISSUER`, issuerRaw),
      clientId,
      clientSecret,
      ...(kindRaw === "github"
        ? {
            authorizationUrl:
              optionalUrl("AUTHORIZATION_URL") ?? "https://github.com/login/oauth/authorize",
            tokenUrl: optionalUrl("TOKEN_URL") ?? "https://github.com/login/oauth/access_token",
            apiUrl,
          }
        : {}),
    };
  });
  refuseSharedGithubIssuers(providers);
  const publicRaw = env["PUBLIC_URL"]?.trim();
  const publicUrl = publicRaw ? checkedUrl("PUBLIC_URL", publicRaw) : undefined;
  if (mode === "production" && providers.length > 0 && !publicUrl) {
    throw new ConfigError(
      "PUBLIC_URL is required when AUTH_PROVIDERS is set: the providers redirect back to <PUBLIC_URL>/auth/callback/<id>",
    );
  }
  const ttlRaw = env["SESSION_TTL_HOURS"]?.trim() || "12";
  const ttl = Number(ttlRaw);
  if (!Number.isFinite(ttl) || ttl < 0.01 || ttl > 24 * 30)
    throw new ConfigError("SESSION_TTL_HOURS must be a number of hours from 0.01 to 720");
  return {
    providers,
    publicUrl,
    sessionTtlMs: Math.round(ttl * 3_600_000),
    dashboardDir: env["DASHBOARD_DIR"]?.trim() || "dashboard/dist",
  };
}

/**
 * The variables this file reads, for docs/configuration.md (`npm run
 * docs:config`; a test fails when one read here is missing). `<ID>` is a
 * provider id of `AUTH_PROVIDERS` in upper case, `-` as `_`.
 */
export const VARIABLES: readonly ConfigVariable[] = [
  {
    name: "AUTH_PROVIDERS",
    default: "none (devnet: two local providers)",
    description:
      "Dashboard sign-in providers, comma-separated ids (lower-case letters, digits and `-`). Empty: the dashboard offers no sign-in.",
    example: "AUTH_PROVIDERS=google,github",
  },
  {
    name: "AUTH_<ID>_KIND",
    default: "`github` for the id `github`, else `oidc`",
    description:
      "`oidc`: any OpenID Connect provider; `github`: GitHub OAuth 2.0 and its user API (`/user`, and `/user/emails` for a verified email).",
  },
  {
    name: "AUTH_<ID>_ISSUER",
    default: "GitHub: `https://github.com`",
    description:
      "The OpenID issuer URL (discovery runs against it); for GitHub, only the identity's issuer. `https://` only, `http://` on loopback. Required for `oidc`.",
  },
  {
    name: "AUTH_<ID>_CLIENT_ID",
    description:
      "The OAuth client id registered with the provider (required); its redirect URI is `<PUBLIC_URL>/auth/callback/<id>`.",
  },
  {
    name: "AUTH_<ID>_CLIENT_SECRET",
    description: "That client's secret (required).",
    secret: true,
  },
  {
    name: "AUTH_<ID>_LABEL",
    default: "the id, capitalised",
    description: "The sign-in button's text.",
  },
  {
    name: "AUTH_<ID>_AUTHORIZATION_URL",
    default: "`https://github.com/login/oauth/authorize`",
    description: "GitHub only: the authorization endpoint (GitHub Enterprise, or a test double).",
  },
  {
    name: "AUTH_<ID>_TOKEN_URL",
    default: "`https://github.com/login/oauth/access_token`",
    description: "GitHub only: the token endpoint.",
  },
  {
    name: "AUTH_<ID>_API_URL",
    default: "`https://api.github.com`",
    description: "GitHub only: the user API.",
  },
  {
    name: "PUBLIC_URL",
    default: "none (devnet: the request's loopback origin)",
    description:
      "The service's public origin, for sign-in redirects and the dashboard's quick-start panel. Required in production with `AUTH_PROVIDERS`.",
    example: "PUBLIC_URL=https://facilitator.example.com",
  },
  {
    name: "SESSION_TTL_HOURS",
    default: "`12`",
    description: "How long a dashboard session lasts, in hours (0.01 to 720).",
  },
  {
    name: "DASHBOARD_DIR",
    default: "`dashboard/dist`",
    description: "The built dashboard served under `/dashboard/`.",
  },
];

/**
 * Two GitHub providers that call different APIs hand out ids from different
 * user spaces; under one issuer, user N of one would sign in as user N of
 * the other. A shared issuer can only come from setting it by hand.
 */
function refuseSharedGithubIssuers(providers: readonly AuthProviderConfig[]): void {
  const seen = new Map<string, AuthProviderConfig>();
  for (const p of providers) {
    if (p.kind !== "github") continue;
    const other = seen.get(p.issuer);
    if (other && new URL(other.apiUrl!).origin !== new URL(p.apiUrl!).origin) {
      const name = (id: string) => `AUTH_${id.toUpperCase().replace(/-/g, "_")}_ISSUER`;
      throw new ConfigError(
        `the GitHub providers ${other.id} and ${p.id} call different APIs but share the issuer ${p.issuer}, so their users' ids would collide: give ${name(p.id)} (or ${name(other.id)}) its own value, or leave it unset`,
      );
    }
    seen.set(p.issuer, p);
  }
}
