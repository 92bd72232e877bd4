/**
 * A Kysely dialect for PGlite that is safe under concurrency.
 *
 * PGlite is one embedded connection. Kysely assumes a pool: each transaction
 * gets its own connection. If two requests shared the PGlite connection, one
 * request's query could run inside another's BEGIN … COMMIT. This driver
 * therefore hands out the single connection to one holder at a time (a
 * lock), which is exactly a pool of size one.
 *
 * The lock serves two lanes. Work that finishes a request already in flight
 * (a settlement's outcome, its transaction's receipt) goes before new work
 * waiting for the connection: when a block answers a hundred settles at
 * once, their outcome writes would otherwise queue behind the reads and
 * intents of the payments the same customers send next, and every answer
 * would wait for them. New work is never starved: after a few turns of
 * finishing work in a row, one waiting new holder goes.
 */
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from "kysely";

/** What a statement returns: PGlite's rows and its count of affected rows. */
export interface EmbeddedResult<R> {
  rows: R[];
  affectedRows?: number | undefined;
}

/** The embedded database as this driver uses it (PGlite, here on its own thread). */
export interface EmbeddedDatabase {
  query<R>(sql: string, params: readonly unknown[]): Promise<EmbeddedResult<R>>;
  close(): Promise<void>;
  readonly closed: boolean;
}

class PGliteConnection implements DatabaseConnection {
  constructor(private readonly client: EmbeddedDatabase) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const res = await this.client.query<R>(query.sql, query.parameters);
    const affected = res.affectedRows;
    return {
      rows: res.rows,
      ...(affected !== undefined ? { numAffectedRows: BigInt(affected) } : {}),
    };
  }

  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error("PGlite does not support streaming queries");
  }
}

/** Turns finishing work may take in a row while new work waits. */
const FINISHING_IN_A_ROW = 4;

/** The one connection's lock: one holder at a time, finishing work first. */
export class ConnectionLock {
  private held = false;
  private readonly finishing: (() => void)[] = [];
  private readonly fresh: (() => void)[] = [];
  private finishingInARow = 0;
  private readonly drained: (() => void)[] = [];

  acquire(finishing: boolean): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => (finishing ? this.finishing : this.fresh).push(resolve));
  }

  release(): void {
    const takeFresh =
      this.fresh.length > 0 &&
      (this.finishing.length === 0 || this.finishingInARow >= FINISHING_IN_A_ROW);
    const next = takeFresh ? this.fresh.shift() : this.finishing.shift();
    if (!next) {
      this.held = false;
      for (const done of this.drained.splice(0)) done();
      return;
    }
    this.finishingInARow = takeFresh ? 0 : this.finishingInARow + 1;
    next();
  }

  /** Resolves once nobody holds or waits for the connection. */
  idle(): Promise<void> {
    if (!this.held) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }
}

class PGliteDriver implements Driver {
  private readonly connection: PGliteConnection;

  constructor(
    private readonly client: EmbeddedDatabase,
    private readonly lock: ConnectionLock,
    private readonly finishing: boolean,
  ) {
    this.connection = new PGliteConnection(client);
  }

  // The database is open before the dialect is made (PGliteThread.open).
  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.lock.acquire(this.finishing);
    return this.connection;
  }

  async beginTransaction(conn: DatabaseConnection): Promise<void> {
    await conn.executeQuery(CompiledQuery.raw("BEGIN"));
  }

  async commitTransaction(conn: DatabaseConnection): Promise<void> {
    await conn.executeQuery(CompiledQuery.raw("COMMIT"));
  }

  async rollbackTransaction(conn: DatabaseConnection): Promise<void> {
    await conn.executeQuery(CompiledQuery.raw("ROLLBACK"));
  }

  async releaseConnection(): Promise<void> {
    this.lock.release();
  }

  /** Waits for every holder; the finishing lane's driver leaves the database open. */
  async destroy(): Promise<void> {
    await this.lock.idle();
    if (!this.finishing && !this.client.closed) await this.client.close();
  }
}

export class PGliteDialect implements Dialect {
  /**
   * `lock` is shared by the dialects of one database; `finishing` puts this
   * dialect's holders in the finishing lane (see the top of this file).
   */
  constructor(
    private readonly client: EmbeddedDatabase,
    private readonly lock = new ConnectionLock(),
    private readonly finishing = false,
  ) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.client, this.lock, this.finishing);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
}
