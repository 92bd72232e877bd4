/**
 * RPC, webhook and resource URLs often carry credentials in their path or
 * query (`https://provider.example/v2/<api-key>`), and error messages from
 * HTTP clients quote the URL they failed on. Logs keep the scheme and host
 * only, everywhere: the logger applies this to every string it writes.
 */
const URL_IN_TEXT =
  /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s/?#@"'<>]*@)?([^\s/?#"'<>]+)([^\s"'<>)\]]*)/gi;

export function redactUrls(text: string): string {
  return text.replace(URL_IN_TEXT, (_all, scheme: string, host: string, rest: string) =>
    rest && rest !== "/" ? `${scheme}${host}/…` : `${scheme}${host}${rest}`,
  );
}

/** Redacts every string in a log record's fields (a few levels deep; records are small). */
export function redactUrlsDeep(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return redactUrls(value);
  if (depth > 4 || typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map((v) => redactUrlsDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = redactUrlsDeep(v, depth + 1);
  return out;
}
