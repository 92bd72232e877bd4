/**
 * `npm run keys -- <command>`: API keys and accounts from the command line,
 * until the dashboard exists.
 *
 *   create --name <name> [--account <account id or name>]
 *   list [--account <account id or name>]
 *   delete <key id>
 *   accounts                       list accounts
 *   accounts create --name <name>
 *   accounts plan <account id or name> <plan> [--days <n>] [--note "…"]   a comp
 *   accounts billing <account id or name>   billing history
 *   accounts suspend|resume <account id or name> [--reason "…"]
 *   accounts claim <account id or name> --issuer <url> --subject <id> [--provider <id>]
 *   webhooks set|show|remove|log <account id or name> [--url <url>]
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../config/index.js";
import { openMigratedDb, type Db } from "../storage/db.js";
import {
  createAccount,
  findAccount,
  findAccountByName,
  listAccounts,
} from "../features/accounts/accounts.js";
import { createApiKey, deleteApiKey, listApiKeys } from "../features/keys/apiKeys.js";
import { PLAN_NAMES, isPlanName, usdOf } from "../features/plans/plans.js";
import { setAccountSuspended } from "../features/plans/quotaLedger.js";
import { compPlan, listBillingHistory } from "../features/billing/billingLedger.js";
import { BILLING_ACCOUNT_ID } from "../features/billing/billingAccount.js";
import {
  getWebhookEndpoint,
  listWebhookDeliveries,
  removeWebhookEndpoint,
  setWebhookEndpoint,
} from "../features/webhooks/webhookRepository.js";
import { WebhookTargetError } from "../features/webhooks/ssrfGuard.js";
import { claimAccount } from "../features/identity/identities.js";

const USAGE = `usage: npm run keys -- <command>

  create --name <name> [--account <id|name>]   create a key; the full key is printed once
  list [--account <id|name>]                   list live keys (masked)
  delete <key id>                              delete (revoke) a key
  accounts                                     list accounts
  accounts create --name <name>                create an account
  accounts plan <id|name> <plan> [--days <n>] [--note "…"]
                                               set the plan by hand (free, starter, pro, max, payg), at
                                               once and free of charge: a comp, recorded in the account's
                                               billing history; with --days it falls back to Free after
                                               that many days, without it it does not run out
  accounts billing <id|name>                   the account's billing history (payments and comps)
  accounts suspend <id|name> [--reason "…"]    refuse /settle with 402 account_suspended; the reason shows in the dashboard
  accounts resume <id|name>                    lift a suspension
  accounts claim <id|name> --issuer <url> --subject <id> [--provider <id>]
                                               bind a sign-in identity to the account, so
                                               its owner signs in to it in the dashboard
  webhooks set <account> --url <url>           set the webhook endpoint; prints a new signing secret once
  webhooks show <account>                      show the endpoint (secret masked)
  webhooks remove <account>                    remove the endpoint; undelivered events are dropped
  webhooks log <account>                       recent delivery attempts

The database is the service's: DATABASE_URL, or the embedded one in DATA_DIR (default .data).`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

class UsageError extends Error {}

async function resolveAccount(db: Db, ref: string | undefined, createIfMissing: boolean) {
  if (ref) {
    const acc = UUID.test(ref) ? await findAccount(db, ref) : await findAccountByName(db, ref);
    if (!acc) throw new UsageError(`no account "${ref}"; see \`npm run keys -- accounts\``);
    return acc;
  }
  // The billing account (this service's own) is never a default.
  const existing = (await listAccounts(db)).filter((a) => a.id !== BILLING_ACCOUNT_ID);
  if (existing.length === 1) return existing[0]!;
  if (existing.length > 1)
    throw new UsageError("several accounts exist: name one with --account <id|name>");
  if (!createIfMissing) throw new UsageError("no accounts yet: create a key first");
  return createAccount(db, "default");
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: "string" },
      account: { type: "string" },
      url: { type: "string" },
      issuer: { type: "string" },
      subject: { type: "string" },
      provider: { type: "string" },
      reason: { type: "string" },
      days: { type: "string" },
      note: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [command, sub, target, extra] = positionals;
  if (values.help || !command) {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  const config = loadConfig();
  const opened = await openMigratedDb({
    databaseUrl: config.databaseUrl,
    dataDir: join(config.dataDir, "pglite"),
  });
  const db = opened.db;
  try {
    switch (command) {
      case "create": {
        const name = values.name?.trim();
        if (!name) throw new UsageError("create needs --name <name>, e.g. --name staging");
        if (name.length > 100) throw new UsageError("--name must be at most 100 characters");
        const account = await resolveAccount(db, values.account, true);
        const key = await createApiKey(db, account.id, name);
        console.log(`Created API key "${key.name}" (id ${key.id}) for account "${account.name}".`);
        console.log("");
        console.log(`  ${key.key}`);
        console.log("");
        console.log(
          "This is the only time the full key is shown. Store it in your secret manager now.",
        );
        return 0;
      }
      case "list": {
        const account = values.account
          ? await resolveAccount(db, values.account, false)
          : undefined;
        const keys = await listApiKeys(db, account?.id);
        if (keys.length === 0) {
          console.log("no API keys; create one with `npm run keys -- create --name <name>`");
          return 0;
        }
        const fmt = (d: Date | null) => (d ? d.toISOString().replace(/\.\d+Z$/, "Z") : "never");
        console.log(
          table([
            ["ID", "NAME", "KEY", "ACCOUNT", "CREATED", "LAST USED"],
            ...keys.map((k) => [
              k.id,
              k.name,
              k.prefix,
              k.accountId,
              fmt(k.createdAt),
              fmt(k.lastUsedAt),
            ]),
          ]),
        );
        return 0;
      }
      case "delete": {
        if (!sub || !UUID.test(sub))
          throw new UsageError("delete needs a key id (see `npm run keys -- list`)");
        const ok = await deleteApiKey(db, sub);
        if (!ok) throw new UsageError(`no live key with id ${sub}`);
        console.log(
          `Deleted key ${sub}. It stops working within seconds on every running replica.`,
        );
        return 0;
      }
      case "accounts": {
        if (sub === "create") {
          const name = values.name?.trim();
          if (!name) throw new UsageError("accounts create needs --name <name>");
          const acc = await createAccount(db, name);
          console.log(`Created account "${acc.name}" (id ${acc.id}).`);
          return 0;
        }
        if (sub === "plan") {
          const plan = extra?.trim() ?? "";
          if (!target || !isPlanName(plan))
            throw new UsageError(
              `accounts plan needs <account id|name> <plan>, plan one of ${PLAN_NAMES.join(", ")}`,
            );
          const days = values.days === undefined ? undefined : Number(values.days);
          if (days !== undefined && (!Number.isInteger(days) || days < 1 || days > 36_500))
            throw new UsageError("--days must be a whole number of days from 1 to 36500");
          const acc = await resolveAccount(db, target, false);
          const comp = await compPlan(db, acc.id, plan, {
            ...(days !== undefined ? { days } : {}),
            ...(values.note !== undefined ? { note: values.note } : {}),
          });
          console.log(
            `Account "${acc.name}" is now on the ${plan} plan (from its next settle)${
              comp.period_end
                ? `, until ${comp.period_end.toISOString()}, then Free`
                : ", with no end date"
            }. Recorded as a comp in its billing history.`,
          );
          return 0;
        }
        if (sub === "billing") {
          if (!target) throw new UsageError("accounts billing needs <account id|name>");
          const acc = await resolveAccount(db, target, false);
          const history = await listBillingHistory(db, acc.id, () => null);
          if (history.length === 0) {
            console.log(`no billing payments or comps for account "${acc.name}"`);
            return 0;
          }
          console.log(
            table([
              [
                "DATE",
                "KIND",
                "PLAN",
                "USD",
                "NETWORK",
                "TRANSACTION",
                "PERIOD END",
                "SOURCE",
                "STATUS",
                "NOTE",
              ],
              ...history.map((h) => [
                h.date,
                h.kind,
                h.plan ?? "-",
                h.amountUsd,
                h.network ?? "-",
                h.transaction ?? "-",
                h.periodEnd ?? "-",
                h.source,
                h.status,
                h.note ?? "",
              ]),
            ]),
          );
          return 0;
        }
        if (sub === "suspend" || sub === "resume") {
          if (!target) throw new UsageError(`accounts ${sub} needs <account id|name>`);
          const acc = await resolveAccount(db, target, false);
          await setAccountSuspended(db, acc.id, sub === "suspend", values.reason);
          console.log(
            sub === "suspend"
              ? `Account "${acc.name}" is suspended: /settle answers 402 account_suspended.`
              : `Account "${acc.name}" is resumed.`,
          );
          return 0;
        }
        if (sub === "claim") {
          const issuer = values.issuer?.trim();
          const subject = values.subject?.trim();
          if (!target || !issuer || !subject)
            throw new UsageError(
              "accounts claim needs <account id|name> --issuer <issuer URL> --subject <subject id>",
            );
          const acc = await resolveAccount(db, target, false);
          const provider =
            values.provider?.trim() ||
            config.auth.providers.find((p) => p.issuer === issuer)?.id ||
            "operator";
          const result = await claimAccount(db, acc.id, { issuer, subject, provider });
          if (result.kind === "already_bound")
            throw new UsageError(
              `that identity already signs in to account ${result.accountId}; it was not moved`,
            );
          if (result.kind === "no_account") throw new UsageError(`no account "${target}"`);
          console.log(
            `Account "${acc.name}" is claimed: ${subject} at ${issuer} now signs in to it.`,
          );
          return 0;
        }
        if (sub) throw new UsageError(`unknown accounts command "${sub}"`);
        const accounts = await listAccounts(db);
        if (accounts.length === 0) {
          console.log("no accounts yet");
          return 0;
        }
        console.log(
          table([
            ["ID", "NAME", "PLAN", "PAID UNTIL", "BALANCE USD", "CREATED"],
            ...accounts.map((a) => [
              a.id,
              a.id === BILLING_ACCOUNT_ID ? `${a.name} [service]` : a.name,
              a.suspended_at ? `${a.plan} (suspended)` : a.plan,
              a.paid_until ? a.paid_until.toISOString() : "-",
              usdOf(a.balance_micro_usd),
              a.created_at.toISOString(),
            ]),
          ]),
        );
        return 0;
      }
      case "webhooks": {
        if (!sub || !["set", "show", "remove", "log"].includes(sub))
          throw new UsageError("webhooks needs set, show, remove or log");
        if (!target) throw new UsageError(`webhooks ${sub} needs an account id or name`);
        const account = await resolveAccount(db, target, false);
        if (sub === "set") {
          if (!values.url) throw new UsageError("webhooks set needs --url <url>");
          const endpoint = await setWebhookEndpoint(db, account.id, values.url, {
            allowPrivateTargets: config.webhooks.allowPrivateTargets,
          }).catch((e: unknown) => {
            throw e instanceof WebhookTargetError ? new UsageError(e.message) : e;
          });
          console.log(`Webhook endpoint for account "${account.name}": ${endpoint.url}`);
          console.log("");
          console.log(`  ${endpoint.secret}`);
          console.log("");
          console.log(
            "This signing secret is shown only now. Verify deliveries with it (Standard Webhooks).",
          );
          return 0;
        }
        if (sub === "show") {
          const endpoint = await getWebhookEndpoint(db, account.id);
          if (!endpoint) {
            console.log(`no webhook endpoint for account "${account.name}"`);
            return 0;
          }
          console.log(`url      ${endpoint.url}`);
          console.log(`secret   ${endpoint.secret.slice(0, 10)}…`);
          console.log(`updated  ${endpoint.updatedAt.toISOString()}`);
          return 0;
        }
        if (sub === "remove") {
          const ok = await removeWebhookEndpoint(db, account.id);
          if (!ok) throw new UsageError(`no webhook endpoint for account "${account.name}"`);
          console.log(`Removed the webhook endpoint of account "${account.name}".`);
          return 0;
        }
        const log = await listWebhookDeliveries(db, account.id);
        if (log.length === 0) {
          console.log("no delivery attempts yet");
          return 0;
        }
        console.log(
          table([
            ["AT", "EVENT", "TYPE", "ATTEMPT", "STATUS", "LATENCY", "ERROR", "NEXT RETRY"],
            ...log.map((d) => [
              d.at.toISOString(),
              d.eventId,
              d.type,
              String(d.attempt),
              d.statusCode === null ? "-" : String(d.statusCode),
              `${d.latencyMs} ms`,
              d.error ?? "",
              d.nextRetryAt ? d.nextRetryAt.toISOString() : "-",
            ]),
          ]),
        );
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${command}"\n\n${USAGE}`);
    }
  } finally {
    await opened.close();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    if (e instanceof UsageError || e instanceof ConfigError) {
      console.error(`error: ${e.message}`);
      process.exit(2);
    }
    console.error(`error: ${(e as Error).message}`);
    process.exit(1);
  },
);
