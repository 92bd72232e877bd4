/**
 * A raw POST to the service, for tests that read the status, headers or
 * body the official clients do not expose (a 503's Retry-After, a 400's
 * error body), on any family's routes.
 */
export function post(
  url: string,
  path: string,
  body: unknown,
  apiKey?: string,
  headers: Record<string, string> = {},
) {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(apiKey ? { "x-api-key": apiKey } : {}),
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}
