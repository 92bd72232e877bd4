/**
 * The account the benchmarks' load carries, seeded in the service's
 * database before the service starts: metered and rate limited, as
 * production is, on the max plan (room for every settle, and a per-key
 * limit, RATE_LIMIT_PLAN_MAX in each bench's environment, above the load).
 */
import type { Db } from "../src/storage/db.js";
import { createAccount } from "../src/features/accounts/accounts.js";
import { setAccountPlan } from "../src/features/plans/quotaLedger.js";
import { createApiKey } from "../src/features/keys/apiKeys.js";

export async function seedBenchAccount(db: Db): Promise<{ accountId: string; key: string }> {
  const account = await createAccount(db, "bench");
  await setAccountPlan(db, account.id, "max");
  const { key } = await createApiKey(db, account.id, "bench");
  return { accountId: account.id, key };
}
