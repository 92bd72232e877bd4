/**
 * The database traffic counter: every statement is one round trip, and a
 * transaction adds its BEGIN and its COMMIT (or ROLLBACK).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { openDb, type OpenedDb } from "./db.js";

describe("database traffic counter", () => {
  let database: OpenedDb;
  const seen = { statements: 0, control: 0 };
  const take = () => {
    const now = { ...seen };
    seen.statements = 0;
    seen.control = 0;
    return now;
  };
  before(async () => {
    database = await openDb({
      dataDir: "memory://",
      traffic: { statement: () => seen.statements++, transactionControl: () => seen.control++ },
    });
    await sql`create table counted (n int)`.execute(database.db);
    take();
  });
  after(() => database.close());

  test("a statement on its own is one round trip", async () => {
    await database.db
      .insertInto("counted" as never)
      .values({ n: 1 } as never)
      .execute();
    await sql`select 1`.execute(database.db);
    assert.deepEqual(take(), { statements: 2, control: 0 });
  });

  test("a transaction adds BEGIN and COMMIT", async () => {
    await database.db.transaction().execute(async (trx) => {
      await sql`insert into counted values (2)`.execute(trx);
      await sql`insert into counted values (3)`.execute(trx);
    });
    assert.deepEqual(take(), { statements: 2, control: 2 });
  });

  test("a failed transaction adds BEGIN and ROLLBACK", async () => {
    await assert.rejects(
      database.db.transaction().execute(async (trx) => {
        await sql`insert into counted values (4)`.execute(trx);
        throw new Error("changed my mind");
      }),
    );
    assert.deepEqual(take(), { statements: 1, control: 2 });
    const rows = await sql<{ n: number }>`select n from counted where n = 4`.execute(database.db);
    assert.deepEqual(rows.rows, [], "the rollback still happened: the counter changes nothing");
  });
});
