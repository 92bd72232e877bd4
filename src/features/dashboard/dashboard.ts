/**
 * Everything the dashboard's JSON API may do, bound to the database and
 * always scoped to the signed-in account: the HTTP layer passes the
 * session's account id, and no function here reaches another account's
 * rows. An id that belongs to someone else reads as "not found".
 */
import type { Db } from "../../storage/db.js";
import {
  createApiKey,
  deleteApiKey,
  listApiKeys,
  type ApiKeyListing,
  type CreatedApiKey,
} from "../keys/apiKeys.js";
import { readPlanStatus, type PlanStatus } from "../plans/planStatus.js";
import { DEFAULT_FAILURES_PER_HOUR } from "../plans/reservationGuard.js";
import type { PlanLimits } from "../plans/plans.js";
import { listIdentities, signInAccount, type VerifiedIdentity } from "../identity/identities.js";
import {
  endSession,
  findSession,
  startSession,
  type DashboardSession,
  type StartedSession,
} from "../identity/sessions.js";
import {
  listEvents,
  queueTestEvent,
  readEndpoint,
  resendEvent,
  rotateSecret,
  saveEndpoint,
  type WebhookEventType,
} from "../webhooks/endpointSettings.js";
import { removeWebhookEndpoint } from "../webhooks/webhookRepository.js";
import { AssetCatalog } from "./assets.js";
import type { NetworkDescription } from "../../chains/ports.js";
import type { AuthConfig } from "../../config/auth.js";
import { SignIn } from "../identity/signIn.js";
import { readMetrics, readOverview, type MetricRange } from "./activity.js";
import { listSettlements, settlementsCsv, type SettlementFilters } from "./settlementList.js";

export interface DashboardOptions {
  db: Db;
  assets: AssetCatalog;
  plans: PlanLimits & { metering: boolean };
  sessionTtlMs: number;
  allowPrivateWebhookTargets: boolean;
  /** Live API keys an account may hold (API_KEYS_PER_ACCOUNT). */
  maxKeysPerAccount: number;
  /** Told when a key is deleted, so this replica's key cache forgets it at once. */
  onKeyDeleted?: () => void;
  /** The account a provider's first sign-ins join, if it names one (the devnet's providers). */
  joinAccountOf?: (provider: string) => string | undefined;
}

function createDashboard(opts: DashboardOptions) {
  const { db, assets } = opts;
  // The on-chain failure limit is the quota ledger's: none when settlements are not metered.
  const failureLimits = opts.plans.metering
    ? (opts.plans.failuresPerHour ?? DEFAULT_FAILURES_PER_HOUR)
    : null;
  return {
    /** First sign-in creates the account (free plan) or joins its provider's; then a session starts. */
    async signIn(
      identity: VerifiedIdentity,
    ): Promise<StartedSession & { accountCreated: boolean }> {
      const { account, created } = await signInAccount(db, identity, {
        joinAccount: opts.joinAccountOf?.(identity.provider),
      });
      const session = await startSession(
        db,
        { accountId: account.id, issuer: identity.issuer, subject: identity.subject },
        opts.sessionTtlMs,
      );
      return { ...session, accountCreated: created };
    },
    session: (token: string | undefined): Promise<DashboardSession | undefined> =>
      findSession(db, token),
    signOut: (sessionId: string) => endSession(db, sessionId),

    async whoAmI(session: DashboardSession) {
      const [account, identities] = await Promise.all([
        db
          .selectFrom("accounts")
          .select(["id", "name", "plan", "created_at"])
          .where("id", "=", session.accountId)
          .executeTakeFirstOrThrow(),
        listIdentities(db, session.accountId),
      ]);
      const me = identities.find(
        (i) => i.issuer === session.issuer && i.subject === session.subject,
      );
      return { account, identity: me, identities };
    },

    overview: (accountId: string) => readOverview(db, assets, accountId, failureLimits),
    metrics: (accountId: string, range: MetricRange) => readMetrics(db, assets, accountId, range),
    settlements: (
      accountId: string,
      filters: SettlementFilters,
      page: { cursor?: string | undefined; limit: number },
    ) => listSettlements(db, assets, accountId, filters, page),
    settlementsCsv: (accountId: string, filters: SettlementFilters) =>
      settlementsCsv(db, assets, accountId, filters),

    plan: (accountId: string): Promise<PlanStatus> =>
      readPlanStatus(db, accountId, opts.plans, opts.plans.metering),
    /** A transaction's public explorer page (none on the devnet). Plans change through billing. */
    explorerUrl: (network: string, transaction: string | null) =>
      assets.explorerUrl(network, transaction),

    keys: (accountId: string): Promise<ApiKeyListing[]> => listApiKeys(db, accountId),
    /** @throws ServiceError key_limit_reached when the account holds the most keys it may. */
    createKey: (accountId: string, name: string): Promise<CreatedApiKey> =>
      createApiKey(db, accountId, name, { maxLiveKeys: opts.maxKeysPerAccount }),
    /** Revokes one of the account's own live keys; false when none matched. */
    async deleteKey(accountId: string, keyId: string): Promise<boolean> {
      // Other replicas hear of it through the database (deleteApiKey announces it).
      const deleted = await deleteApiKey(db, keyId, accountId);
      if (deleted) opts.onKeyDeleted?.();
      return deleted;
    },

    webhook: (accountId: string) => readEndpoint(db, accountId),
    saveWebhook: (accountId: string, input: { url: string; events: readonly WebhookEventType[] }) =>
      saveEndpoint(db, accountId, input, { allowPrivateTargets: opts.allowPrivateWebhookTargets }),
    removeWebhook: (accountId: string) => removeWebhookEndpoint(db, accountId),
    rotateWebhookSecret: (accountId: string) => rotateSecret(db, accountId),
    testWebhook: (accountId: string) => queueTestEvent(db, accountId),
    resendWebhookEvent: (accountId: string, eventId: string) => resendEvent(db, accountId, eventId),
    webhookEvents: (accountId: string) => listEvents(db, accountId),
  };
}

export type Dashboard = ReturnType<typeof createDashboard>;

/**
 * The dashboard as the service opens it: the feature, its sign-in providers
 * and session settings, and the asset names it shows amounts and explorer
 * links with (the chain families' descriptions, plus any local copies).
 */
export function openDashboard(opts: {
  db: Db;
  config: {
    mode: "devnet" | "production";
    plans: PlanLimits & { metering: boolean };
    auth: AuthConfig;
    webhooks: { allowPrivateTargets: boolean };
    apiKeysPerAccount: number;
  };
  networks: readonly NetworkDescription[];
  assetKey: (network: string, id: string) => string;
  onKeyDeleted: () => void;
}) {
  const { config } = opts;
  return {
    dashboard: createDashboard({
      db: opts.db,
      // Local chains have no public explorer.
      assets: new AssetCatalog(opts.networks, opts.assetKey, {
        explorers: config.mode !== "devnet",
      }),
      plans: config.plans,
      sessionTtlMs: config.auth.sessionTtlMs,
      allowPrivateWebhookTargets: config.webhooks.allowPrivateTargets,
      maxKeysPerAccount: config.apiKeysPerAccount,
      onKeyDeleted: opts.onKeyDeleted,
      joinAccountOf: (id) => config.auth.providers.find((p) => p.id === id)?.joinsAccount,
    }),
    signIn: new SignIn(config.auth.providers),
    sessionTtlMs: config.auth.sessionTtlMs,
    publicUrl: config.auth.publicUrl,
    staticDir: config.auth.dashboardDir,
  };
}
