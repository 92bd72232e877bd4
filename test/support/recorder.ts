/**
 * The settlement recorder on an in-memory database, with one account and
 * API key to record under, for the tests of what reads and writes the
 * settlements table beside the code.
 */
import type { Insertable } from "kysely";
import { openMigratedDb, type OpenedDb } from "../../src/storage/db.js";
import type { Database } from "../../src/storage/schema.js";
import { createLogger } from "../../src/lib/logger.js";
import type { PaymentRequest } from "../../src/protocol/index.js";
import { createAccount } from "../../src/features/accounts/accounts.js";
import { createApiKey } from "../../src/features/keys/apiKeys.js";
import { FAMILIES, NAMESPACES } from "../../src/chains/index.js";
import { SettlementRecorder } from "../../src/features/settlements/settlementRecorder.js";
import type { SettlementMetering } from "../../src/features/settlements/transitionEffects.js";

/** A network the service serves, the first of the family table's; the recorder never checks it. */
const NETWORK = FAMILIES[NAMESPACES[0]!].networks[0]!.id;

/** A payment request as the recorder stores it; its payload is never checked here. */
export const SAMPLE_REQUEST = {
  x402Version: 2,
  paymentPayload: { x402Version: 2, payload: { n: 1 } },
  paymentRequirements: {
    scheme: "exact",
    network: NETWORK,
    asset: "0x2222222222222222222222222222222222222222",
    amount: "5",
    payTo: "0x3333333333333333333333333333333333333333",
  },
} as unknown as PaymentRequest;

export interface RecorderFixture {
  database: OpenedDb;
  recorder: SettlementRecorder;
  principal: { accountId: string; keyId: string; keyName: string };
}

/** Opens the database and the recorder (metered by `metering` when given), and an account named `name`. */
export async function openRecorderFixture(
  name: string,
  metering?: (database: OpenedDb) => SettlementMetering,
): Promise<RecorderFixture> {
  const database = await openMigratedDb({ dataDir: "memory://" });
  const recorder = new SettlementRecorder(
    database.db,
    createLogger("silent"),
    metering?.(database),
  );
  const account = await createAccount(database.db, name);
  const key = await createApiKey(database.db, account.id, name);
  return {
    database,
    recorder,
    principal: { accountId: account.id, keyId: key.id, keyName: key.name },
  };
}

/**
 * A settlements row of a success with a transaction, as the recorder
 * writes one, for `insertInto("settlements")`; `fields` replace its values.
 */
export function succeededRow(
  fields: { id: string; account_id: string; api_key_id: string } & Partial<
    Insertable<Database["settlements"]>
  >,
): Insertable<Database["settlements"]> {
  const at = new Date();
  return {
    network: NETWORK,
    scheme: "exact",
    payer: null,
    pay_to: "0x0000000000000000000000000000000000000001",
    asset: "0x0000000000000000000000000000000000000002",
    amount: "1",
    payload_fingerprint: fields.id,
    status: "succeeded",
    transaction: "0x01",
    error_reason: null,
    error_message: null,
    started_at: at,
    finished_at: at,
    duration_ms: 1,
    request: null,
    ...fields,
  };
}
