/**
 * The confidential vault's operator-key lease across replicas (issue 50): a
 * replica whose database stalls past the lease's term stops sending, so it
 * never sends alongside the replica that takes the key over. The stall is
 * real: replica A reaches PostgreSQL through a relay that stops passing
 * bytes, as a stalled network or server does.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { openDb, type OpenedDb } from "../../src/storage/db.js";
import {
  DbOperatorLease,
  OperatorLeaseLost,
} from "../../src/features/confidential/operatorLease.js";
import { availableBackends, openTestDb } from "../support/database.js";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.js";

const TTL_MS = 600;
const needsServer = !availableBackends().includes("postgres");

describe(
  "the operator-key lease (PostgreSQL)",
  { skip: needsServer && "needs TEST_DATABASE_URL" },
  () => {
    let shared: OpenedDb & { url?: string };
    let proxy: TcpProxy;
    let viaProxy: OpenedDb;

    before(async () => {
      shared = await openTestDb("postgres");
      const url = new URL(shared.url!);
      proxy = await startTcpProxy(url.hostname, Number(url.port || 5432));
      url.hostname = "127.0.0.1";
      url.port = String(proxy.port);
      viaProxy = await openDb({ databaseUrl: url.toString(), poolSize: 4 });
    });

    after(async () => {
      proxy?.resume();
      await viaProxy?.close();
      await proxy?.close();
      await shared?.close();
    });

    const holderNow = async () =>
      (
        await sql<{
          holder: string | null;
        }>`select holder from confidential_operator_lease where id = 1`.execute(shared.db)
      ).rows[0]?.holder ?? null;

    test("a replica whose database stalls past the lease term stops sending; the replica that takes over sends alone", async () => {
      const a = new DbOperatorLease(viaProxy.db, { holder: "replica-a", ttlMs: TTL_MS });
      const b = new DbOperatorLease(shared.db, { holder: "replica-b", ttlMs: TTL_MS });
      const sent: string[] = [];
      const send = (who: string, held: { ensureHeld(): void }) => {
        held.ensureHeld();
        sent.push(who);
      };

      // Unstalled, A holds and sends, then gives the lease up.
      await a.hold(async (held) => send("a", held));
      assert.equal(await holderNow(), null);

      // A holds the key, then its database stalls before its next transaction
      // (a slow chain read, a receipt awaited): its lease runs out in the
      // database and B takes the key and sends.
      let bSent!: () => void;
      const bDone = new Promise<void>((r) => (bSent = r));
      const aRun = a.hold(async (held) => {
        send("a", held);
        proxy.stall();
        await b.hold(async (heldB) => {
          assert.equal(await holderNow(), "replica-b");
          send("b", heldB);
        });
        bSent();
        // A's turn to send again: it must not.
        send("a", held);
      });
      await bDone;
      proxy.resume();
      await assert.rejects(aRun, (e: unknown) => {
        assert.ok(e instanceof OperatorLeaseLost, String(e));
        assert.match(e.message, /lease was lost/);
        return true;
      });
      assert.deepEqual(sent, ["a", "a", "b"], "A sent after its lease passed to B");
      // A's late renewals did not take the key back from whoever holds it now.
      assert.notEqual(await holderNow(), "replica-a");
    });
  },
);
