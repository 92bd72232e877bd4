/**
 * GET /discovery/resources and GET /discovery/search: the public catalog.
 * No authentication. Query parameters are validated here; a bad one is a 400
 * in the service's error envelope naming the parameter, never a 500.
 * Unknown parameters are ignored; empty filter values count as absent.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import type { CatalogReader } from "../../features/catalog/catalogReader.js";
import {
  DEFAULT_PAGE_LIMIT,
  MAX_FILTER_EXTENSIONS,
  MAX_OFFSET,
  MAX_PAGE_LIMIT,
  MAX_QUERY_LENGTH,
  PAYMENT_SCHEMES,
  RESOURCE_TYPES,
} from "../../features/catalog/limits.js";
import { sendError } from "../errorEnvelope.js";

/** The largest number ten digits write: no bound a client needs to be told of. */
const UNBOUNDED = 9_999_999_999;

/**
 * A page size: any whole number from 1, served at MAX_PAGE_LIMIT when it
 * asks for more (the response's `pagination.limit` says what was applied),
 * so a client asking for "everything" gets the largest page, not an error.
 */
function pageSize(fallback: number) {
  const rule = "limit must be a whole number from 1";
  return z
    .string()
    .regex(/^\d{1,10}$/, rule)
    .transform(Number)
    .pipe(z.number().min(1, rule))
    .transform((n) => Math.min(n, MAX_PAGE_LIMIT))
    .default(fallback);
}

function wholeNumber(name: string, min: number, max: number, fallback: number) {
  const rule = `${name} must be a whole number from ${min}${max < UNBOUNDED ? ` to ${max}` : ""}`;
  return z
    .string()
    .regex(/^\d{1,10}$/, rule)
    .transform(Number)
    .pipe(z.number().min(min, rule).max(max, rule))
    .default(fallback);
}

const filters = {
  type: z.enum(RESOURCE_TYPES, { error: `type must be one of ${RESOURCE_TYPES.join(", ")}` }),
  payTo: z
    .string()
    .regex(/^[\x21-\x7e]{1,256}$/, "payTo must be an address of 1 to 256 printable characters"),
  scheme: z.enum(PAYMENT_SCHEMES, {
    error: `scheme must be one of ${PAYMENT_SCHEMES.join(", ")}`,
  }),
  network: z
    .string()
    .regex(
      /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/,
      "network must be a CAIP-2 network id such as eip155:8453",
    ),
  extensions: z
    .string()
    .transform((v) => v.split(",").map((k) => k.trim()))
    .pipe(
      z
        .array(
          z
            .string()
            .regex(
              /^[A-Za-z0-9_.:-]{1,64}$/,
              "extensions must be extension keys such as bazaar, separated by commas",
            ),
        )
        .max(
          MAX_FILTER_EXTENSIONS,
          `extensions may name at most ${MAX_FILTER_EXTENSIONS} extension keys`,
        ),
    ),
};

const filterSchema = z.object({
  type: filters.type.optional(),
  payTo: filters.payTo.optional(),
  scheme: filters.scheme.optional(),
  network: filters.network.optional(),
  extensions: filters.extensions.optional(),
});

const listSchema = filterSchema.extend({
  limit: pageSize(DEFAULT_PAGE_LIMIT),
  // Past the end is an empty page, however far (the reader refuses only a
  // deep offset into a catalog that reaches it).
  offset: wholeNumber("offset", 0, UNBOUNDED, 0),
});

const searchSchema = filterSchema.extend({
  query: z
    .string({ error: "query is required: the words to search for, e.g. ?query=weather" })
    .trim()
    .min(1, "query is required: the words to search for, e.g. ?query=weather")
    .max(MAX_QUERY_LENGTH, `query must be at most ${MAX_QUERY_LENGTH} characters`),
  limit: pageSize(DEFAULT_PAGE_LIMIT),
  offset: wholeNumber("offset", 0, MAX_OFFSET, 0).optional(),
  cursor: z
    .string()
    .max(200, "cursor is not one this service issued; pass pagination.cursor unchanged")
    .optional(),
});

type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

/**
 * Repeated parameters are refused (which one would win is a guess), and
 * empty filter values are dropped so `?network=` means "any network".
 */
function parseQuery<S extends z.ZodType>(
  schema: S,
  raw: unknown,
  keepEmpty: readonly string[],
): Parsed<z.output<S>> {
  const input: Record<string, string> = {};
  for (const [key, value] of Object.entries((raw ?? {}) as Record<string, unknown>)) {
    if (Array.isArray(value)) return { ok: false, message: `${key} must be given at most once` };
    if (typeof value !== "string") continue;
    if (value === "" && !keepEmpty.includes(key)) continue;
    input[key] = value;
  }
  const parsed = schema.safeParse(input);
  if (parsed.success) return { ok: true, value: parsed.data };
  return { ok: false, message: parsed.error.issues[0]?.message ?? "invalid query parameters" };
}

export function registerDiscoveryRoutes(
  app: FastifyInstance,
  deps: { catalog: CatalogReader },
): void {
  app.get("/discovery/resources", async (request: FastifyRequest, reply: FastifyReply) => {
    const parsed = parseQuery(listSchema, request.query, []);
    if (!parsed.ok) return sendError(reply, "invalid_request", parsed.message);
    return reply.send(await deps.catalog.list(parsed.value));
  });

  app.get("/discovery/search", async (request: FastifyRequest, reply: FastifyReply) => {
    const query = (request.query ?? {}) as Record<string, unknown>;
    if (query["offset"] !== undefined && query["cursor"] !== undefined) {
      return sendError(
        reply,
        "invalid_request",
        "give cursor (pagination.cursor of the previous page) or offset, not both",
      );
    }
    const parsed = parseQuery(searchSchema, query, ["query", "cursor"]);
    if (!parsed.ok) return sendError(reply, "invalid_request", parsed.message);
    return reply.send(await deps.catalog.search(parsed.value));
  });
}
