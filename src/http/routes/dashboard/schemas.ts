/** JSON schemas shared by the dashboard routes (validation and the OpenAPI document). */

export const errorEnvelope = {
  type: "object",
  description: "The service's error envelope",
  required: ["error", "message", "requestId"],
  properties: {
    error: { type: "string" },
    message: { type: "string" },
    requestId: { type: "string" },
  },
  additionalProperties: true,
} as const;

export const errorResponses = {
  400: errorEnvelope,
  401: errorEnvelope,
  403: errorEnvelope,
  404: errorEnvelope,
} as const;

export const uuidParams = {
  type: "object",
  required: ["id"],
  properties: { id: { type: "string", format: "uuid" } },
} as const;

const sessionSecurity = [{ session: [] }];

/** Every dashboard data route: signed-in session, tagged, with the error envelope documented. */
export function sessionRoute<T extends Record<string, unknown>>(tag: string, schema: T) {
  return {
    config: { auth: "session" as const },
    schema: {
      tags: [`dashboard: ${tag}`],
      security: sessionSecurity,
      ...schema,
      response: { ...errorResponses, ...((schema["response"] as object | undefined) ?? {}) },
    },
  };
}
