/**
 * A Kysely dialect for PGlite that is safe under concurrency.
 *
 * PGlite is one embedded connection. Kysely assumes a pool: each transaction
 * gets its own connection. If two requests shared the PGlite connection, one
 * request's query could run inside another's BEGIN … COMMIT. This driver
 * therefore hands out the single connection to one holder at a time (a
 * lock), which is exactly a pool of size one.
 *
 * The lock serves three lanes, most urgent first:
 * - `answer`: work that answers a settle in flight (its transaction's
 *   receipt, its outcome). When a block answers a hundred settles at once,
 *   their writes would otherwise queue behind the work of the payments the
 *   same customers send next, and every answer would wait for it;
 * - `send`: a transaction's journal entry, the last step before it leaves,
 *   which a settle in flight (and on Starknet an executor's next send)
 *   waits for. It goes after answers: the payments sent right after a
 *   block are the ones its answers let go, and their entries would
 *   otherwise hold up the rest of that block's answers;
 * - `new`: everything else (reads, intents, quota, new requests).
 * No lane is starved: a lane passed over a few turns in a row takes the
 * next one.
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

/** The lanes of the one connection, most urgent first (see the top of this file). */
const LANES = ["answer", "send", "new"] as const;
export type Lane = (typeof LANES)[number];

/** Turns a waiting lane may be passed over in a row before it takes one. */
const PASSED_OVER_AT_MOST = 4;

interface Waiting {
  readonly holders: (() => void)[];
  passedOver: number;
}

/** The one connection's lock: one holder at a time, the most urgent lane first. */
export class ConnectionLock {
  private held = false;
  private readonly lanes: Record<Lane, Waiting> = {
    answer: { holders: [], passedOver: 0 },
    send: { holders: [], passedOver: 0 },
    new: { holders: [], passedOver: 0 },
  };
  private readonly drained: (() => void)[] = [];

  acquire(lane: Lane): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.lanes[lane].holders.push(resolve));
  }

  release(): void {
    const waiting = LANES.map((l) => this.lanes[l]).filter((w) => w.holders.length > 0);
    // The most urgent lane that was passed over too often, else the most urgent.
    const next = waiting.find((w) => w.passedOver >= PASSED_OVER_AT_MOST) ?? waiting[0];
    if (!next) {
      this.held = false;
      for (const done of this.drained.splice(0)) done();
      return;
    }
    for (const w of waiting) w.passedOver = w === next ? 0 : w.passedOver + 1;
    next.holders.shift()!();
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
    private readonly lane: Lane,
  ) {
    this.connection = new PGliteConnection(client);
  }

  // The database is open before the dialect is made (PGliteThread.open).
  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.lock.acquire(this.lane);
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

  /** Waits for every holder; only the `new` lane's driver closes the database. */
  async destroy(): Promise<void> {
    await this.lock.idle();
    if (this.lane === "new" && !this.client.closed) await this.client.close();
  }
}

export class PGliteDialect implements Dialect {
  /**
   * `lock` is shared by the dialects of one database; `lane` is the lane
   * this dialect's holders wait in (see the top of this file).
   */
  constructor(
    private readonly client: EmbeddedDatabase,
    private readonly lock = new ConnectionLock(),
    private readonly lane: Lane = "new",
  ) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.client, this.lock, this.lane);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
  createIntrospector(db: Kysely<unknown>) {
    return new PostgresIntrospector(db);
  }
}
