/**
 * The text side of full-text search, shared by writes and reads: which words
 * of an entry are indexed at which weight, and how a visitor's query becomes
 * a PostgreSQL `tsquery`. The stemming itself is PostgreSQL's `english`
 * configuration, so PGlite and a PostgreSQL server rank identically.
 */

/** Weighted text of one entry: A ranks highest, D lowest. */
export interface SearchDocument {
  /** Service name and MCP tool name. */
  a: string;
  /** Tags. */
  b: string;
  /** Description. */
  c: string;
  /** The type (`http`, `mcp`) and the words of the URL: scheme, host labels, path segments. */
  d: string;
}

const WORD = /[\p{L}\p{N}]+/gu;

function words(text: string): string[] {
  return text.normalize("NFKC").toLowerCase().match(WORD) ?? [];
}

/**
 * "https://api.example.com/v1/weather-forecast" -> "https api.example.com api
 * example com v1 weather forecast": the scheme, the host whole and by its
 * labels, and the path's words.
 */
export function urlWords(resource: string): string {
  let url: URL;
  try {
    url = new URL(resource);
  } catch {
    return words(resource).join(" ");
  }
  return [
    url.protocol.replace(/:$/, ""),
    url.hostname,
    ...words(url.hostname),
    ...words(decodePath(url.pathname)),
  ].join(" ");
}

function decodePath(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

export function searchDocument(entry: {
  resource: string;
  type: string;
  serviceName?: string | undefined;
  toolName?: string | undefined;
  tags?: readonly string[] | undefined;
  description?: string | undefined;
}): SearchDocument {
  const tool = entry.toolName ? `${entry.toolName} ${words(entry.toolName).join(" ")}` : "";
  return {
    a: [entry.serviceName ?? "", tool].join(" ").trim(),
    b: (entry.tags ?? []).join(" "),
    c: entry.description ?? "",
    d: `${entry.type} ${urlWords(entry.resource)}`,
  };
}

/**
 * The distinct words of a query, in order. Only letters and digits survive,
 * so the result is always safe to hand to `to_tsquery`.
 */
export function searchTerms(query: string): string[] {
  return [...new Set(words(query))];
}

/** Words this long or longer also match as the start of a longer word. */
const MIN_PREFIX_LENGTH = 3;

/**
 * Any word may match (`|`): a natural-language query such as "weather
 * forecast api" finds entries that have some of the words, and `ts_rank`
 * puts those with more of them, or with them in heavier fields, first. A
 * word of three or more characters also matches words it begins (`:*`), so
 * "weath" finds "weather" and "http" finds "https"; shorter ones ("s" of
 * "API's") match only themselves.
 */
export function tsqueryText(terms: readonly string[]): string {
  return terms.map((t) => (t.length >= MIN_PREFIX_LENGTH ? `${t}:*` : t)).join(" | ");
}
