/**
 * The service's routes over plain HTTP, for any family's tests: a raw POST,
 * for what the official clients do not expose (a 503's Retry-After, a 400's
 * error body), and copies of one settle sent at once, with the rule their
 * answers must keep.
 */

/** A raw POST to the service. */
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

export interface SettleAnswer {
  success: boolean;
  transaction: string;
  errorReason?: string;
}

/** `copies` identical `/settle` calls at once, spread over `urls` in turn; their answers. */
export function settleAtOnce(
  urls: readonly string[],
  body: unknown,
  apiKey: string,
  copies: number,
  headers: Record<string, string> = {},
): Promise<SettleAnswer[]> {
  return Promise.all(
    Array.from({ length: copies }, async (_, i) => {
      const res = await post(urls[i % urls.length]!, "/settle", body, apiKey, headers);
      return (await res.json()) as SettleAnswer;
    }),
  );
}

/**
 * The one-success rule on a set of answers to copies of one payment: exactly
 * one `success: true`, every other a refusal with an empty transaction (what
 * keeps a resource server from delivering or retrying) and one of
 * `reasons`: `duplicate_settlement` for a copy that came while the first
 * was settling, or the family's replay reason for one that came after its
 * success was answered (which of the two a copy meets is a matter of timing).
 * Returns the success.
 */
export function onlyOneSuccess(
  answers: readonly SettleAnswer[],
  reasons: readonly string[] = ["duplicate_settlement"],
): SettleAnswer {
  const successes = answers.filter((a) => a.success);
  if (successes.length !== 1) {
    throw new Error(
      `expected exactly one success, got ${successes.length}: ${JSON.stringify(answers)}`,
    );
  }
  const others = answers.filter((a) => !a.success);
  const wrong = others.find((a) => !reasons.includes(a.errorReason ?? "") || a.transaction !== "");
  if (wrong) {
    throw new Error(
      `expected ${reasons.join(" or ")} with no transaction, got ${JSON.stringify(wrong)}`,
    );
  }
  return successes[0]!;
}
