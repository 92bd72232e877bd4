import { randomUUID } from "node:crypto";

/** Request ids travel in `X-Request-Id` and in every error body. */
export function newRequestId(): string {
  return `req_${randomUUID().replaceAll("-", "")}`;
}
