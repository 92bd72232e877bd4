/**
 * The embedded database on its own thread: values come back as PGlite gives
 * them, a refused statement keeps PostgreSQL's error fields, transactions
 * through Kysely still hold, the service's thread keeps running while a
 * statement executes, and a closed database refuses further statements.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { EmbeddedDbError, PGliteThread } from "./pgliteThread.js";
import { openDb, type OpenedDb } from "./db.js";

describe("PGlite on its own thread", () => {
  let thread: PGliteThread;
  before(async () => {
    thread = await PGliteThread.open({ dataDir: "memory://", conf: [] });
    await thread.query(
      "CREATE TABLE t (id int PRIMARY KEY, amount numeric, at timestamptz, raw bytea, doc jsonb)",
      [],
    );
  });
  after(() => thread.close());

  test("values cross the thread as PGlite returns them", async () => {
    const at = new Date("2026-01-02T03:04:05.678Z");
    const inserted = await thread.query("INSERT INTO t VALUES ($1, $2, $3, $4, $5)", [
      1,
      "12345678901234567890.5",
      at,
      new Uint8Array([1, 2, 255]),
      JSON.stringify({ a: [1, "b"] }),
    ]);
    assert.equal(inserted.affectedRows, 1);
    const { rows } = await thread.query<{
      id: number;
      amount: string;
      at: Date;
      raw: Uint8Array;
      doc: unknown;
    }>("SELECT * FROM t WHERE id = $1", [1]);
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.equal(row.id, 1);
    assert.equal(row.amount, "12345678901234567890.5", "numeric stays an exact string");
    assert.ok(row.at instanceof Date);
    assert.equal(row.at.toISOString(), at.toISOString());
    assert.deepEqual([...row.raw], [1, 2, 255]);
    assert.deepEqual(row.doc, { a: [1, "b"] });
  });

  test("a refused statement rejects with PostgreSQL's code and constraint, and the next one runs", async () => {
    await thread.query("INSERT INTO t (id) VALUES (2)", []);
    await assert.rejects(thread.query("INSERT INTO t (id) VALUES (2)", []), (e: unknown) => {
      assert.ok(e instanceof EmbeddedDbError);
      assert.equal(e.code, "23505");
      assert.equal(e.constraint, "t_pkey");
      assert.match(e.message, /duplicate key/);
      return true;
    });
    const { rows } = await thread.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM t WHERE id = 2",
      [],
    );
    assert.equal(rows[0]!.n, 1);
  });

  test("the service's thread keeps turning while a long statement executes", async () => {
    let turns = 0;
    let running = true;
    const spin = () => {
      turns++;
      if (running) setImmediate(spin);
    };
    setImmediate(spin);
    const { rows } = await thread.query<{ s: string }>(
      "SELECT sum(g)::text AS s FROM generate_series(1, 3000000) g",
      [],
    );
    running = false;
    assert.equal(rows[0]!.s, "4500001500000");
    // In the same thread the statement would block the event loop from start
    // to end, and no turn could happen while it ran.
    assert.ok(turns >= 50, `the event loop turned ${turns} times during the statement`);
  });
});

describe("PGlite through Kysely on its own thread", () => {
  let opened: OpenedDb;
  before(async () => {
    opened = await openDb({ dataDir: "memory://" });
    await sql`CREATE TABLE k (id int PRIMARY KEY)`.execute(opened.db);
  });
  after(() => opened.close());

  test("a failed transaction writes nothing, while concurrent statements outside it still run", async () => {
    const outside = Array.from({ length: 20 }, (_, i) =>
      sql`INSERT INTO k VALUES (${100 + i})`.execute(opened.db),
    );
    await assert.rejects(
      opened.db.transaction().execute(async (tx) => {
        await sql`INSERT INTO k VALUES (1)`.execute(tx);
        await sql`INSERT INTO k VALUES (1)`.execute(tx);
      }),
      /duplicate key/,
    );
    await Promise.all(outside);
    const ids = await sql<{ id: number }>`SELECT id FROM k ORDER BY id`.execute(opened.db);
    assert.deepEqual(
      ids.rows.map((r) => r.id),
      Array.from({ length: 20 }, (_, i) => 100 + i),
    );
  });

  test("after close every statement is refused", async () => {
    const other = await PGliteThread.open({ dataDir: "memory://", conf: [] });
    await other.close();
    assert.equal(other.closed, true);
    await assert.rejects(other.query("SELECT 1", []), /closed/);
    // Closing twice is harmless.
    await other.close();
  });
});
