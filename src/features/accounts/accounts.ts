/**
 * Accounts own API keys and are what settlements are attributed to.
 */
import { randomUUID } from "node:crypto";
import type { Db } from "../../storage/db.js";
import type { Account } from "../../storage/schema.js";

export async function createAccount(db: Db, name: string): Promise<Account> {
  return db
    .insertInto("accounts")
    .values({ id: randomUUID(), name })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findAccount(db: Db, id: string): Promise<Account | undefined> {
  return db.selectFrom("accounts").selectAll().where("id", "=", id).executeTakeFirst();
}

export async function findAccountByName(db: Db, name: string): Promise<Account | undefined> {
  return db
    .selectFrom("accounts")
    .selectAll()
    .where("name", "=", name)
    .orderBy("created_at")
    .executeTakeFirst();
}

export async function listAccounts(db: Db): Promise<Account[]> {
  return db.selectFrom("accounts").selectAll().orderBy("created_at").execute();
}
