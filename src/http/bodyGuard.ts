/**
 * The edge check every JSON body passes before a route sees it: bounded
 * nesting, and only text PostgreSQL can store. A payload that verifies must
 * be settleable, and settling stores the request; a NUL character or an
 * unpaired UTF-16 surrogate anywhere in it (keys included) cannot be stored,
 * and nesting thousands deep overflows the stack of the code that walks it.
 * Both are refused here, for /verify and /settle alike, with a 400 naming
 * the field, before any work is done.
 *
 * The walk is iterative, so the guard itself cannot overflow.
 */

/** Deeper than any x402 body needs (the deepest official shape nests about 8). */
export const MAX_BODY_DEPTH = 32;

export type BodyProblem = { path: string; message: string };

function describePath(path: readonly (string | number)[]): string {
  if (path.length === 0) return "the body";
  return path
    .map((p, i) =>
      typeof p === "number"
        ? `[${p}]`
        : /^[A-Za-z_$][\w$-]*$/.test(p)
          ? `${i === 0 ? "" : "."}${p}`
          : `[${JSON.stringify(p.slice(0, 40))}]`,
    )
    .join("");
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function textProblem(s: string): string | undefined {
  if (s.includes("\u0000")) return "contains a NUL character (\\u0000), which cannot be stored";
  if (LONE_SURROGATE.test(s)) {
    return "contains an unpaired UTF-16 surrogate, which is not valid Unicode text";
  }
  return undefined;
}

/** The first problem in a parsed JSON value, or undefined when it is storable. */
export function findBodyProblem(body: unknown, maxDepth = MAX_BODY_DEPTH): BodyProblem | undefined {
  const stack: { value: unknown; path: (string | number)[] }[] = [{ value: body, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === "string") {
      const problem = textProblem(value);
      if (problem) return { path: describePath(path), message: problem };
      continue;
    }
    if (typeof value !== "object" || value === null) continue;
    if (path.length >= maxDepth) {
      return {
        path: describePath(path),
        message: `nests deeper than ${maxDepth} levels; x402 bodies are far shallower`,
      };
    }
    if (Array.isArray(value)) {
      value.forEach((v, i) => stack.push({ value: v, path: [...path, i] }));
      continue;
    }
    for (const [k, v] of Object.entries(value)) {
      const keyProblem = textProblem(k);
      if (keyProblem) {
        return { path: describePath(path), message: `has a field name that ${keyProblem}` };
      }
      stack.push({ value: v, path: [...path, k] });
    }
  }
  return undefined;
}
