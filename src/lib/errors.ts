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
