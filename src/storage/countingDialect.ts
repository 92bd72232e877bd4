/**
 * Counts what the service asks of its database, below Kysely, so every
 * query is seen: built ones, raw SQL, and the BEGIN/COMMIT/ROLLBACK that
 * Kysely's drivers send themselves (a Kysely plugin would miss those).
 *
 * Two figures, because they cost differently:
 * - a statement reads or writes data;
 * - a round trip is one exchange with the database, a statement or a
 *   transaction command. Neither `pg` nor PGlite sends several statements in
 *   one exchange, so a transaction of N statements costs N + 2 round trips
 *   (BEGIN, COMMIT), and every one of them waits for the one before.
 */
import type {
  CompiledQuery,
  DatabaseConnection,
  Dialect,
  Driver,
  Kysely,
  QueryCompiler,
  QueryResult,
  TransactionSettings,
} from "kysely";

/** Told of every exchange with the database. */
export interface DbTraffic {
  /** A statement that reads or writes data, with its text (tests list what a path asks). */
  statement(sql: string): void;
  /** BEGIN, COMMIT, ROLLBACK or a savepoint command: a round trip that carries no data. */
  transactionControl(command: "begin" | "commit" | "rollback" | "savepoint"): void;
}

class CountingConnection implements DatabaseConnection {
  constructor(
    readonly inner: DatabaseConnection,
    private readonly traffic: DbTraffic,
  ) {}

  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    this.traffic.statement(query.sql);
    return this.inner.executeQuery<R>(query);
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    this.traffic.statement(query.sql);
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}

const innerOf = (conn: DatabaseConnection): DatabaseConnection =>
  conn instanceof CountingConnection ? conn.inner : conn;

class CountingDriver implements Driver {
  constructor(
    private readonly inner: Driver,
    private readonly traffic: DbTraffic,
  ) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    return new CountingConnection(await this.inner.acquireConnection(), this.traffic);
  }

  beginTransaction(conn: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    this.traffic.transactionControl("begin");
    return this.inner.beginTransaction(innerOf(conn), settings);
  }

  commitTransaction(conn: DatabaseConnection): Promise<void> {
    this.traffic.transactionControl("commit");
    return this.inner.commitTransaction(innerOf(conn));
  }

  rollbackTransaction(conn: DatabaseConnection): Promise<void> {
    this.traffic.transactionControl("rollback");
    return this.inner.rollbackTransaction(innerOf(conn));
  }

  async savepoint(
    conn: DatabaseConnection,
    name: string,
    compile: QueryCompiler["compileQuery"],
  ): Promise<void> {
    this.traffic.transactionControl("savepoint");
    await this.required("savepoint").call(this.inner, innerOf(conn), name, compile);
  }

  async rollbackToSavepoint(
    conn: DatabaseConnection,
    name: string,
    compile: QueryCompiler["compileQuery"],
  ): Promise<void> {
    this.traffic.transactionControl("savepoint");
    await this.required("rollbackToSavepoint").call(this.inner, innerOf(conn), name, compile);
  }

  async releaseSavepoint(
    conn: DatabaseConnection,
    name: string,
    compile: QueryCompiler["compileQuery"],
  ): Promise<void> {
    this.traffic.transactionControl("savepoint");
    await this.required("releaseSavepoint").call(this.inner, innerOf(conn), name, compile);
  }

  releaseConnection(conn: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection(innerOf(conn));
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }

  private required<K extends "savepoint" | "rollbackToSavepoint" | "releaseSavepoint">(
    method: K,
  ): NonNullable<Driver[K]> {
    const fn = this.inner[method];
    if (!fn) throw new Error(`this database driver does not support ${method}`);
    return fn as NonNullable<Driver[K]>;
  }
}

/** `dialect`, with every exchange told to `traffic`. */
export function countingDialect(dialect: Dialect, traffic: DbTraffic): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createDriver: () => new CountingDriver(dialect.createDriver(), traffic),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createIntrospector: (db: Kysely<unknown>) => dialect.createIntrospector(db),
  };
}
