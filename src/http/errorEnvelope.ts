/**
 * Every non-2xx response body: `{ error, message, requestId }`, plus any
 * details the error carries. This is the only place that knows HTTP statuses.
 */
import type { FastifyReply } from "fastify";
import { httpStatusOf, type ErrorCode, type ServiceError } from "../lib/errors.js";

export function sendError(
  reply: FastifyReply,
  code: ErrorCode,
  message: string,
  details?: Record<string, unknown>,
): FastifyReply {
  return reply
    .status(httpStatusOf(code))
    .type("application/json; charset=utf-8")
    .send({ ...details, error: code, message, requestId: reply.request.id });
}

export function sendServiceError(reply: FastifyReply, e: ServiceError): FastifyReply {
  const after = e.details?.["retryAfterSeconds"];
  if (typeof after === "number") reply.header("Retry-After", String(after));
  else if (e.retryable && httpStatusOf(e.code) >= 500) reply.header("Retry-After", "1");
  return sendError(reply, e.code, e.message, e.details);
}

/** Maps Fastify's own transport errors (parser, limits) onto our codes. */
export function codeForFastifyError(err: {
  code?: string;
  statusCode?: number;
  message?: string;
}): {
  code: ErrorCode;
  message: string;
} {
  switch (err.code) {
    // A route's JSON schema refused the request: Fastify's message names the
    // field and the rule (e.g. "body/name must NOT have fewer than 1 characters").
    case "FST_ERR_VALIDATION":
      return { code: "invalid_request", message: err.message ?? "the request is not valid" };
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return {
        code: "unsupported_media_type",
        message: "send the body as Content-Type: application/json",
      };
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return {
        code: "payload_too_large",
        message: "the request body is larger than this service accepts",
      };
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return { code: "invalid_json", message: "the request body is empty; send a JSON object" };
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return {
        code: "invalid_request",
        message: "the Content-Length header does not match the body",
      };
    default:
      break;
  }
  // Only Fastify's own body parser sets 400 on what it throws; an error
  // without a status is a bug here and must surface as one.
  if (err.statusCode === 400) {
    return { code: "invalid_json", message: "the request body is not valid JSON" };
  }
  if (err.statusCode === 413)
    return { code: "payload_too_large", message: "the request body is too large" };
  if (err.statusCode === 415)
    return { code: "unsupported_media_type", message: "send the body as application/json" };
  if (err.statusCode === 429) {
    const detail = (err as { message?: string }).message;
    return { code: "rate_limited", message: detail || "too many requests; slow down" };
  }
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    return { code: "invalid_request", message: "the request could not be read" };
  }
  return { code: "internal_error", message: "an internal error occurred; it has been logged" };
}
