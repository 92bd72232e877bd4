/**
 * API-key authentication for every replica: the cached authenticator, and
 * the change feed through which a key deleted on any replica (or by the CLI)
 * is forgotten at once on all of them.
 */
import type { Logger } from "../../lib/logger.js";
import type { Db } from "../../storage/db.js";
import { listenForChanges } from "../../storage/changeFeed.js";
import { API_KEYS_CHANGED } from "./apiKeys.js";
import { ApiKeyAuthenticator } from "./authenticator.js";

export function createKeyAuth(
  db: Db,
  databaseUrl: string | undefined,
  log: Logger,
): { auth: ApiKeyAuthenticator; close(): Promise<void> } {
  const auth = new ApiKeyAuthenticator(db, {
    onError: (e) => log.warn({ err: String(e) }, "could not update api key last_used_at"),
  });
  const changes = listenForChanges(databaseUrl, API_KEYS_CHANGED, () => auth.invalidate(), log);
  return { auth, close: () => changes.close() };
}
