/**
 * A Kysely dialect for PGlite that is safe under concurrency.
 *
 * PGlite is one embedded connection. Kysely assumes a pool: each transaction
 * gets its own connection. If two requests shared the PGlite connection, one
 * request's query could run inside another's BEGIN … COMMIT. This driver
 * therefore hands out the single connection to one holder at a time (a FIFO
 * lock), which is exactly a pool of size one.
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

class PGliteDriver implements Driver {
  private readonly connection: PGliteConnection;
  private tail: Promise<void> = Promise.resolve();
  private release: (() => void) | undefined;

  constructor(private readonly client: EmbeddedDatabase) {
    this.connection = new PGliteConnection(client);
  }

  // The database is open before the dialect is made (PGliteThread.open).
  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const previous = this.tail;
    let unlock!: () => void;
    this.tail = new Promise<void>((resolve) => (unlock = resolve));
    await previous;
    this.release = unlock;
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
    const release = this.release;
    this.release = undefined;
    release?.();
  }

  async destroy(): Promise<void> {
    await this.tail;
    if (!this.client.closed) await this.client.close();
  }
}

export class PGliteDialect implements Dialect {
  constructor(private readonly client: EmbeddedDatabase) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.client);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
}
