/**
 * Two local OpenID providers on loopback (`oidc-provider`), so dashboard
 * sign-in works offline in devnet mode and in the browser tests, through the
 * same openid-client code path as any real provider. Each is its own issuer,
 * so the same login name at each is a different identity, as with two real
 * providers.
 *
 * The login form (ours, below) accepts any name and password; the name
 * becomes the subject, `<name>@<provider>.devnet` the verified email.
 * Consent is granted automatically: this is the operator's own client.
 *
 * Everything oidc-provider asks a deployment to decide is decided here
 * (storage, the login page, lifetimes, the error page), so it has nothing to
 * warn about at start; the one notice that no setting silences (Node 20 is
 * below the runtimes it advertises) goes to `notice`, the caller's debug log.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import type OidcProvider from "oidc-provider";
import type { AuthProviderConfig } from "../src/config/index.js";

export interface LocalIdentityProviders {
  providers: AuthProviderConfig[];
  stop(): Promise<void>;
}

const LOCAL_PROVIDERS = [
  { id: "devnet-id", label: "Devnet ID" },
  { id: "devnet-sso", label: "Devnet SSO" },
] as const;

/**
 * `redirectOrigins`: the origins the service is reached at (e.g.
 * http://127.0.0.1:4020); each provider accepts `<origin>/auth/callback/<id>`.
 */
export async function startLocalIdentityProviders(opts: {
  redirectOrigins: readonly string[];
  /** Where oidc-provider's own notices go (a debug log); dropped when absent. */
  notice?: (line: string) => void;
}): Promise<LocalIdentityProviders> {
  const Provider = await loadProvider(opts.notice ?? (() => undefined));
  const servers: Server[] = [];
  const providers: AuthProviderConfig[] = [];
  try {
    for (const local of LOCAL_PROVIDERS) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => resolve());
      });
      const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const clientId = `x402-dashboard-${local.id}`;
      const clientSecret = randomBytes(24).toString("base64url");
      const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            client_secret: clientSecret,
            redirect_uris: opts.redirectOrigins.map(
              (o) => `${o.replace(/\/$/, "")}/auth/callback/${local.id}`,
            ),
            grant_types: ["authorization_code"],
            response_types: ["code"],
            token_endpoint_auth_method: "client_secret_post",
          },
        ],
        jwks: { keys: [{ ...privateKey.export({ format: "jwk" }), alg: "RS256", use: "sig" }] },
        cookies: { keys: [randomBytes(32).toString("base64url")] },
        pkce: { required: () => true },
        // In memory on purpose: each start is a new issuer on a new port,
        // so nothing these providers hold could be used after a restart.
        adapter: memoryAdapter(),
        features: { devInteractions: { enabled: false } },
        interactions: { url: (_ctx: unknown, i: { uid: string }) => `/interaction/${i.uid}` },
        // Short lives: a sign-in takes seconds, and the dashboard keeps its
        // own session once it has the ID token.
        ttl: {
          AccessToken: 600,
          AuthorizationCode: 60,
          IdToken: 600,
          Interaction: 600,
          Session: 12 * 3600,
          Grant: 12 * 3600,
        },
        // The service exchanges codes server-side: no browser calls these
        // endpoints across origins.
        clientBasedCORS: () => false,
        renderError: (ctx: { type: string; body: string }, out: Record<string, string>) => {
          ctx.type = "html";
          ctx.body = page(
            "Sign-in failed",
            `<p>${escapeHtml(out["error_description"] ?? out["error"] ?? "unknown error")}</p>`,
          );
        },
        // Email and name in the ID token itself, as the big providers do.
        conformIdTokenClaims: false,
        claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"] },
        findAccount: (_ctx: unknown, sub: string) => ({
          accountId: sub,
          claims: () => ({
            sub,
            email: `${sub.toLowerCase().replace(/[^a-z0-9._-]/g, "-")}@${local.id}.devnet`,
            email_verified: true,
            name: sub,
          }),
        }),
        loadExistingGrant: async (ctx: {
          oidc: {
            client: { clientId: string };
            session: { accountId: string };
            provider: InstanceType<typeof Provider>;
          };
        }) => {
          const grant = new ctx.oidc.provider.Grant({
            clientId: ctx.oidc.client.clientId,
            accountId: ctx.oidc.session.accountId,
          });
          grant.addOIDCScope("openid email profile");
          await grant.save();
          return grant;
        },
      });
      const callback = provider.callback();
      server.on("request", (req, res) => {
        const path = new URL(req.url ?? "/", issuer).pathname;
        const interaction = /^\/interaction\/([\w-]+)(\/login)?$/.exec(path);
        if (!interaction) return callback(req, res);
        loginInteraction(provider, req, res, interaction[2] !== undefined).catch((e: unknown) => {
          // An expired or unknown interaction: back to the dashboard to start again.
          res.statusCode = 400;
          res.setHeader("content-type", "text/html; charset=utf-8");
          res.end(page("Sign-in expired", `<p>${escapeHtml(String(e))}</p>`));
        });
      });
      providers.push({
        id: local.id,
        label: local.label,
        kind: "oidc",
        issuer,
        clientId,
        clientSecret,
      });
    }
  } catch (e) {
    await Promise.all(servers.map(close));
    throw e;
  }
  return {
    providers,
    stop: async () => void (await Promise.all(servers.map(close))),
  };
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

type ProviderClass = typeof OidcProvider;
type ProviderInstance = InstanceType<ProviderClass>;

/**
 * oidc-provider, imported on first use so importing this module costs
 * nothing unless providers start. Its import prints one advisory on Node 20
 * (it prefers 22), which this project supports: that line is routed to
 * `notice` while the module loads; anything else passes through.
 */
async function loadProvider(notice: (line: string) => void): Promise<ProviderClass> {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    const line = args.map(String).join(" ");
    if (line.includes("oidc-provider")) notice(line.replace(/\x1b\[[\d;]*m/g, ""));
    else warn(...args);
  };
  try {
    return (await import("oidc-provider")).default;
  } finally {
    console.warn = warn;
  }
}

/**
 * The login page: any name and password. The name is the account (the
 * subject); the password is asked only so the page looks like a sign-in.
 */
async function loginInteraction(
  provider: ProviderInstance,
  req: IncomingMessage,
  res: ServerResponse,
  submitted: boolean,
): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name !== "login") {
    // Consent: granted, as loadExistingGrant grants it (the operator's own client).
    const grant = new provider.Grant({
      clientId: String(details.params["client_id"]),
      accountId: details.session?.accountId ?? "",
    });
    grant.addOIDCScope("openid email profile");
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } });
  }
  const login = submitted ? (await formBody(req)).get("login")?.trim() : undefined;
  if (login) {
    return provider.interactionFinished(
      req,
      res,
      { login: { accountId: login } },
      { mergeWithLastSubmission: false },
    );
  }
  res.setHeader("content-type", "text/html; charset=utf-8");
  res.setHeader("cache-control", "no-store");
  res.end(
    page(
      "Sign-in",
      `<form autocomplete="off" action="/interaction/${encodeURIComponent(details.uid)}/login" method="post">
  <input required type="text" name="login" placeholder="Any name" autofocus>
  <input required type="password" name="password" placeholder="Any password">
  <button type="submit">Sign-in</button>
</form>
<p>A local test provider: any name and password sign in.</p>`,
    ),
  );
}

async function formBody(req: IncomingMessage): Promise<URLSearchParams> {
  let body = "";
  for await (const chunk of req) {
    body += String(chunk);
    if (body.length > 10_000) throw new Error("form too large");
  }
  return new URLSearchParams(body);
}

function page(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:22rem;margin:4rem auto;padding:0 1rem}
input,button{display:block;width:100%;box-sizing:border-box;margin:.5rem 0;padding:.6rem;font:inherit}</style>
</head><body><h1>${escapeHtml(title)}</h1>
${body}
</body></html>`;
}

function escapeHtml(s: string): string {
  return s.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}

interface Stored {
  payload: Record<string, unknown>;
  expiresAt: number;
}

/**
 * oidc-provider's storage interface over one Map per provider. Expired
 * entries are dropped as they are met and on every write, so a devnet that
 * runs for days holds only live sign-ins.
 */
function memoryAdapter() {
  const store = new Map<string, Stored>();
  const live = (key: string): Record<string, unknown> | undefined => {
    const entry = store.get(key);
    if (entry && entry.expiresAt <= Date.now()) store.delete(key);
    return entry && entry.expiresAt > Date.now() ? entry.payload : undefined;
  };
  const findBy = (model: string, field: string, value: string) => {
    for (const key of store.keys()) {
      if (key.startsWith(`${model}:`) && live(key)?.[field] === value) return live(key);
    }
    return undefined;
  };
  return class MemoryAdapter {
    constructor(private readonly model: string) {}
    private key(id: string): string {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>, expiresIn?: number) {
      for (const key of store.keys()) live(key);
      const expiresAt = expiresIn === undefined ? Infinity : Date.now() + expiresIn * 1000;
      store.set(this.key(id), { payload, expiresAt });
    }
    async find(id: string) {
      return live(this.key(id));
    }
    async findByUid(uid: string) {
      return findBy(this.model, "uid", uid);
    }
    async findByUserCode(userCode: string) {
      return findBy(this.model, "userCode", userCode);
    }
    async consume(id: string) {
      const payload = live(this.key(id));
      if (payload) payload["consumed"] = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const [key, entry] of store) if (entry.payload["grantId"] === grantId) store.delete(key);
    }
  };
}
