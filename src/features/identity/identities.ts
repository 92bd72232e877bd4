/**
 * Identities: an identity provider's user (issuer + subject) bound to one
 * account. The subject is the provider's stable id, never the email, which
 * a user can change or a provider can reassign.
 */
import { randomUUID } from "node:crypto";
import type { Db } from "../../storage/db.js";
import type { Account } from "../../storage/schema.js";

export interface VerifiedIdentity {
  issuer: string;
  subject: string;
  /** The configured provider it came through. */
  provider: string;
  email: string | null;
  name: string | null;
}

export interface SignedInAccount {
  account: Account;
  /** True when this sign-in created the account. */
  created: boolean;
}

export interface SignInOptions {
  /**
   * The account a first sign-in joins, by name (the oldest of that name,
   * created if none), instead of a new account of its own: what the
   * devnet's own providers ask for (`AuthProviderConfig.joinsAccount`).
   */
  joinAccount?: string | undefined;
  now?: Date;
}

/**
 * Finds the identity's account, or, on its first sign-in, creates an account
 * on the free plan (or finds the one it joins) and binds the identity to it,
 * in one transaction: two concurrent first sign-ins of one identity end with
 * one account.
 */
export async function accountForSignIn(
  db: Db,
  identity: VerifiedIdentity,
  opts: SignInOptions = {},
): Promise<SignedInAccount> {
  const now = opts.now ?? new Date();
  return db.transaction().execute(async (tx) => {
    const existing = await tx
      .updateTable("identities")
      .set({ last_sign_in_at: now, email: identity.email, display_name: identity.name })
      .where("issuer", "=", identity.issuer)
      .where("subject", "=", identity.subject)
      .returning("account_id")
      .executeTakeFirst();
    if (existing) {
      const account = await tx
        .selectFrom("accounts")
        .selectAll()
        .where("id", "=", existing.account_id)
        .executeTakeFirstOrThrow();
      return { account, created: false };
    }
    const joined = opts.joinAccount
      ? await tx
          .selectFrom("accounts")
          .selectAll()
          .where("name", "=", opts.joinAccount)
          .orderBy("created_at")
          .limit(1)
          .executeTakeFirst()
      : undefined;
    const account =
      joined ??
      (await tx
        .insertInto("accounts")
        .values({
          id: randomUUID(),
          name: opts.joinAccount ?? identity.email ?? identity.name ?? identity.subject,
        })
        .returningAll()
        .executeTakeFirstOrThrow());
    const bound = await tx
      .insertInto("identities")
      .values({
        issuer: identity.issuer,
        subject: identity.subject,
        account_id: account.id,
        provider: identity.provider,
        email: identity.email,
        display_name: identity.name,
        last_sign_in_at: now,
      })
      .onConflict((oc) => oc.columns(["issuer", "subject"]).doNothing())
      .returning("account_id")
      .executeTakeFirst();
    if (!bound) {
      // Another first sign-in of the same identity won the race: the
      // transaction is undone, and the retry finds its account.
      throw new IdentityRaceError();
    }
    return { account, created: !joined };
  });
}

class IdentityRaceError extends Error {}

/** `accountForSignIn`, retried once when a concurrent first sign-in raced it. */
export async function signInAccount(
  db: Db,
  identity: VerifiedIdentity,
  opts: SignInOptions = {},
): Promise<SignedInAccount> {
  try {
    return await accountForSignIn(db, identity, opts);
  } catch (e) {
    if (e instanceof IdentityRaceError) return accountForSignIn(db, identity, opts);
    throw e;
  }
}

export type ClaimResult =
  { kind: "bound" } | { kind: "already_bound"; accountId: string } | { kind: "no_account" };

/**
 * Binds an identity to an existing account (an operator's "claim" of an
 * account the command line created), so its owner signs in to it. An
 * identity bound elsewhere is left alone: moving it is a separate decision.
 */
export async function claimAccount(
  db: Db,
  accountId: string,
  identity: Omit<VerifiedIdentity, "email" | "name"> & { email?: string | null },
): Promise<ClaimResult> {
  const account = await db
    .selectFrom("accounts")
    .select("id")
    .where("id", "=", accountId)
    .executeTakeFirst();
  if (!account) return { kind: "no_account" };
  const inserted = await db
    .insertInto("identities")
    .values({
      issuer: identity.issuer,
      subject: identity.subject,
      account_id: accountId,
      provider: identity.provider,
      email: identity.email ?? null,
      display_name: null,
    })
    .onConflict((oc) => oc.columns(["issuer", "subject"]).doNothing())
    .returning("account_id")
    .executeTakeFirst();
  if (inserted) return { kind: "bound" };
  const current = await db
    .selectFrom("identities")
    .select("account_id")
    .where("issuer", "=", identity.issuer)
    .where("subject", "=", identity.subject)
    .executeTakeFirstOrThrow();
  return current.account_id === accountId
    ? { kind: "bound" }
    : { kind: "already_bound", accountId: current.account_id };
}

export interface IdentityListing {
  issuer: string;
  subject: string;
  provider: string;
  email: string | null;
  name: string | null;
  lastSignInAt: Date | null;
}

export async function listIdentities(db: Db, accountId: string): Promise<IdentityListing[]> {
  const rows = await db
    .selectFrom("identities")
    .selectAll()
    .where("account_id", "=", accountId)
    .orderBy("created_at")
    .execute();
  return rows.map((r) => ({
    issuer: r.issuer,
    subject: r.subject,
    provider: r.provider,
    email: r.email,
    name: r.display_name,
    lastSignInAt: r.last_sign_in_at,
  }));
}
