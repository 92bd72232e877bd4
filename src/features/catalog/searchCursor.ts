/**
 * Opaque continuation cursors for /discovery/search.
 *
 * A cursor carries the offset of the next page and a fingerprint of the
 * query and filters it belongs to, so a cursor replayed against a different
 * search is refused with a clear message instead of paging through the wrong
 * results. Clients treat it as an opaque string.
 */
import { createHash } from "node:crypto";

const VERSION = 1;
const MAX_CURSOR_LENGTH = 200;

export type CursorCheck = { ok: true; offset: number } | { ok: false; reason: string };

/** A short, stable fingerprint of what a search matches. */
export function searchScope(parts: unknown): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("base64url").slice(0, 12);
}

export function encodeCursor(offset: number, scope: string): string {
  return Buffer.from(JSON.stringify({ v: VERSION, o: offset, s: scope }), "utf8").toString(
    "base64url",
  );
}

export function decodeCursor(cursor: string, scope: string, maxOffset: number): CursorCheck {
  const invalid: CursorCheck = {
    ok: false,
    reason: "cursor is not one this service issued; pass pagination.cursor from the previous page",
  };
  if (
    cursor.length === 0 ||
    cursor.length > MAX_CURSOR_LENGTH ||
    !/^[A-Za-z0-9_-]+$/.test(cursor)
  ) {
    return invalid;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    return invalid;
  }
  const c = parsed as { v?: unknown; o?: unknown; s?: unknown };
  if (
    typeof parsed !== "object" ||
    parsed === null ||
    c.v !== VERSION ||
    typeof c.o !== "number" ||
    !Number.isSafeInteger(c.o) ||
    c.o < 0 ||
    c.o > maxOffset
  ) {
    return invalid;
  }
  if (c.s !== scope) {
    return {
      ok: false,
      reason: "cursor belongs to a different search; keep query and filters the same while paging",
    };
  }
  return { ok: true, offset: c.o };
}
