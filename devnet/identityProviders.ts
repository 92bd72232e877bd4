/**
 * Two local OpenID providers on loopback (`oidc-provider`), so dashboard
 * sign-in works offline in devnet mode and in the browser tests, through the
 * same openid-client code path as any real provider. Each is its own issuer,
 * so the same login name at each is a different identity (and account), as
 * with two real providers.
 *
 * The login form accepts any name and password (oidc-provider's development
 * interactions); the name becomes the subject, `<name>@<provider>.devnet`
 * the verified email. Consent is granted automatically: this is the
 * operator's own client.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateKeyPairSync, randomBytes } from "node:crypto";
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
}): Promise<LocalIdentityProviders> {
  // Loaded here, not at the top, so importing this module costs nothing
  // unless providers are started.
  const { default: Provider } = await import("oidc-provider");
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
        features: { devInteractions: { enabled: true } },
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
      server.on("request", provider.callback());
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
