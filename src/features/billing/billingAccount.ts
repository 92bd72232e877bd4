/**
 * The operator's own account, under which this service settles the
 * payments made for its plans: they are recorded like any settlement (the
 * settlements table, its transactions and the reconciler), so the operator
 * sees them in the same place as everything else it settles.
 *
 * Fixed ids, so every replica (and the command line) names the same rows
 * without a look-up, and creating them is an idempotent insert. Its one key
 * is revoked from birth and its value was never kept: nothing outside this
 * process can act as this account.
 */
import { randomBytes } from "node:crypto";
import type { Db } from "../../storage/db.js";
import type { ApiKeyPrincipal } from "../keys/authenticator.js";

export const BILLING_ACCOUNT_ID = "00000000-0000-4000-8000-00000000b111";
export const BILLING_KEY_ID = "00000000-0000-4000-8000-00000000b112";
const BILLING_ACCOUNT_NAME = "billing (this service's plans)";

const BILLING_PRINCIPAL: ApiKeyPrincipal = {
  accountId: BILLING_ACCOUNT_ID,
  keyId: BILLING_KEY_ID,
  keyName: "billing",
};

export async function ensureBillingAccount(db: Db): Promise<ApiKeyPrincipal> {
  await db
    .insertInto("accounts")
    .values({ id: BILLING_ACCOUNT_ID, name: BILLING_ACCOUNT_NAME })
    .onConflict((oc) => oc.column("id").doNothing())
    .execute();
  const now = new Date();
  await db
    .insertInto("api_keys")
    .values({
      id: BILLING_KEY_ID,
      account_id: BILLING_ACCOUNT_ID,
      name: "billing",
      // A random hash no key hashes to: the key cannot be presented.
      key_hash: randomBytes(32),
      prefix: "internal",
      last_used_at: null,
      revoked_at: now,
    })
    .onConflict((oc) => oc.column("id").doNothing())
    .execute();
  return BILLING_PRINCIPAL;
}
