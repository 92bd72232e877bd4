/**
 * The NEAR relayers against the local chain: an account low on NEAR leaves
 * the rotation and is never used while another is funded; two replicas
 * sharing the keys by lease each take a fair share and relay at once
 * without a single nonce clash.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { KeyPair, type KeyPairString } from "@near-js/crypto";
import { baseDecode } from "@near-js/utils";
import { startNearLedger, type RunningNear } from "../../../devnet/near/index.js";
import { NearRelayers, type RelayerKey } from "../../../src/chains/near/relayers.js";
import { NearRpc } from "../../../src/chains/near/rpc.js";
import { decodeDelegate } from "../../../src/chains/near/signedDelegate.js";
import type { JournalEntry, TransactionJournal } from "../../../src/chains/ports.js";
import { DbSignerLeases } from "../../../src/features/signers/dbSignerLeases.js";
import { createLogger } from "../../../src/lib/logger.js";
import { openTestDb } from "../../support/database.js";
import { nearRequirements, signedDelegateFor } from "./payments.js";
import { until } from "../../support/processes.js";

const ONE_NEAR = 10n ** 24n;

describe("NEAR relayers", () => {
  let near: RunningNear;
  let keys: RelayerKey[];

  before(async () => {
    near = await startNearLedger({ blockMs: 100, payers: 5, relayers: 2 });
    keys = near.info.relayers.map((r) => ({
      accountId: r.accountId,
      keyPair: KeyPair.fromString(r.secretKey as KeyPairString),
    }));
  });
  after(() => near.stop());

  const journal = (entries: JournalEntry[]): TransactionJournal => ({
    async sent(e) {
      entries.push(e);
    },
    async finished() {},
  });
  const delegate = async (payer: number, amount: string) =>
    decodeDelegate({
      x402Version: 2,
      accepted: nearRequirements(near),
      payload: {
        signedDelegateAction: await signedDelegateFor(
          near,
          payer,
          nearRequirements(near, { amount }),
        ),
      },
    } as never)!;
  const hash = () => baseDecode(near.ledger.final.hash);

  test("a relayer below the floor leaves the rotation and is not used; topped up, it returns", async () => {
    const low = keys[0]!.accountId;
    near.ledger.account(low)!.amount = ONE_NEAR / 2n;
    const health = new Map<string, boolean>();
    const sent: JournalEntry[] = [];
    const relayers = new NearRelayers({
      network: "near:mainnet",
      rpc: new NearRpc({ network: "near:mainnet", url: near.info.rpcUrl }),
      keys,
      journal: journal(sent),
      log: createLogger("silent"),
      minBalanceYocto: 10n * ONE_NEAR,
      onSignerHealth: (account, healthy) => health.set(account, healthy),
    });
    await relayers.start();
    try {
      assert.equal(health.get(low), false);
      assert.equal(health.get(keys[1]!.accountId), true);
      const hashes: string[] = [];
      for (let i = 0; i < 4; i++) {
        hashes.push((await relayers.relay(await delegate(i, String(100 + i)), hash(), {})).hash);
      }
      await until("the relayed transactions are final", async () =>
        hashes.every((h) => near.ledger.stage(h) === "FINAL") ? true : undefined,
      );
      assert.deepEqual(
        sent.map((e) => e.signer),
        Array(4).fill(keys[1]!.accountId),
      );
      near.ledger.account(low)!.amount = 100n * ONE_NEAR;
      await relayers.checkBalances();
      assert.equal(health.get(low), true);
    } finally {
      await relayers.stop();
    }
  });

  test("two replicas sharing the keys by lease: a fair share each, concurrent relays, no nonce refused", async () => {
    const db = await openTestDb("pglite");
    const leases = new DbSignerLeases(db.db);
    const sent: JournalEntry[] = [];
    const replica = (holder: string) =>
      new NearRelayers({
        network: "near:mainnet",
        rpc: new NearRpc({ network: "near:mainnet", url: near.info.rpcUrl }),
        keys,
        journal: journal(sent),
        log: createLogger("silent"),
        minBalanceYocto: ONE_NEAR,
        leases: { port: leases, holder, ttlMs: 3_000, heartbeatMs: 200 },
      });
    const a = replica("replica-a");
    const b = replica("replica-b");
    await a.start();
    await b.start();
    try {
      await until("each replica holds one key", async () => {
        const rows = await db.db.selectFrom("signer_leases").select(["holder"]).execute();
        return new Set(rows.map((r) => r.holder)).size === 2 ? true : undefined;
      });
      const usdc = near.ledger.token(near.info.assets.USDC)!;
      const before = usdc.balanceOf(near.info.payTo);
      const relayed = await Promise.all(
        [0, 1, 2, 3, 4].map(async (i) =>
          (i % 2 === 0 ? a : b).relay(await delegate(i, "7"), hash(), {}),
        ),
      );
      assert.ok(relayed.every((r) => !r.ambiguous));
      // Each replica sent only with the key it holds.
      const bySigner = new Map<string, number>();
      for (const e of sent) bySigner.set(e.signer!, (bySigner.get(e.signer!) ?? 0) + 1);
      assert.equal(bySigner.size, 2);
      assert.ok(
        sent.every((e) => e.replaces === undefined),
        "no nonce was refused",
      );
      await until("every transfer is final", async () =>
        usdc.balanceOf(near.info.payTo) === before + 35n ? true : undefined,
      );
    } finally {
      await a.stop();
      await b.stop();
      await db.close();
    }
  });
});
