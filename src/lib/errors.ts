/**
 * Service errors: one class, one table from code to HTTP status.
 *
 * Only the HTTP layer turns a code into a status (through `httpStatusOf`);
 * features throw or return `ServiceError`s and never speak HTTP. A bad
 * *payment* is never a ServiceError: it is a normal verify/settle result.
 */

const ERROR_STATUS = {
  invalid_json: 400,
  invalid_request: 400,
  invalid_payment_identifier: 400,
  unauthorized: 401,
  forbidden: 403,
  quota_exceeded: 402,
  account_suspended: 402,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  key_limit_reached: 409,
  payment_identifier_conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  too_many_failed_settlements: 429,
  internal_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class ServiceError extends Error {
  readonly code: ErrorCode;
  /** Whether the caller may retry the same request unchanged. */
  readonly retryable: boolean;
  /** Extra fields merged into the JSON body (e.g. quota details). */
  readonly details: Record<string, unknown> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { retryable?: boolean; details?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "ServiceError";
    this.code = code;
    this.retryable = opts.retryable ?? false;
    this.details = opts.details;
  }
}

export function httpStatusOf(code: ErrorCode): number {
  return ERROR_STATUS[code];
}

export function isServiceError(e: unknown): e is ServiceError {
  return e instanceof ServiceError;
}

/** A short, log-safe description of anything thrown. */
export function describeError(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

/** Socket errors of a store that went away (restarting, unreachable). */
const LOST_CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT"]);

/**
 * Whether `e` says the database could not be reached or dropped the
 * connection (a server restarting, failing over, refusing connections)
 * rather than refused the statement: an outage to retry through, never the
 * caller's fault. PostgreSQL's SQLSTATE class 08 (connection exception) and
 * 57P01–57P03 (the server shutting down or starting), node's socket errors,
 * and pg's own messages for a connection cut mid-query and for a client
 * whose connection broke before it was handed a query.
 */
export function isDatabaseUnavailable(e: unknown): boolean {
  for (let cause = e, depth = 0; cause && depth < 5; depth++) {
    const { code, message } = cause as { code?: unknown; message?: unknown };
    if (typeof code === "string") {
      if (code.startsWith("08") || /^57P0[123]$/.test(code) || LOST_CONNECTION_CODES.has(code)) {
        return true;
      }
    }
    if (
      typeof message === "string" &&
      /Connection terminated|connection error and is not queryable/.test(message)
    ) {
      return true;
    }
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}
