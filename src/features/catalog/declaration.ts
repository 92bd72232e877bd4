/**
 * Reads the bazaar declaration out of a verified payment and decides whether
 * it may enter the catalog. Parsing, schema validation, route templates and
 * the service-metadata sanitizers are the official ones from
 * `@x402/extensions/bazaar`; this module adds the catalog's own rules: size
 * limits, http(s) URLs on public hosts, and no untrusted regular expressions.
 *
 * Pure: no I/O, so every rule is unit-tested beside it.
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  BAZAAR,
  extractDiscoveryInfo,
  isValidRouteTemplate,
  validateDiscoveryExtension,
  validateDiscoveryExtensionSpec,
  type DiscoveryExtension,
  type ValidationResult,
} from "@x402/extensions/bazaar";
import {
  MAX_ACCEPT_BYTES,
  MAX_DECLARATION_BYTES,
  MAX_DESCRIPTION_LENGTH,
  MAX_EXTENSION_KEYS,
  MAX_MIME_TYPE_LENGTH,
  type ResourceType,
} from "./limits.js";
import { checkResourceUrl } from "./resourceUrl.js";

/** Everything the catalog stores for one resource, validated. */
export interface CatalogDraft {
  /** Canonical URL: origin plus route template or path, no query. */
  resource: string;
  /** MCP tool name; '' for HTTP resources. */
  toolName: string;
  type: ResourceType;
  x402Version: number;
  method?: string | undefined;
  description?: string | undefined;
  mimeType?: string | undefined;
  serviceName?: string | undefined;
  tags?: string[] | undefined;
  iconUrl?: string | undefined;
  /** The payment kind this payment used, as the resource server required it. */
  accept: PaymentRequirements;
  /** Keys of every extension the payment declared (for the `extensions` filter). */
  extensionKeys: string[];
  /** The declaration echoed to discovery clients as `extensions.bazaar`. */
  bazaar: { info: unknown; schema: unknown; routeTemplate?: string };
  /**
   * The URL the proof checker fetches: origin and path of the URL this
   * payment was for, query dropped (the same origin as `resource`; it
   * differs from it only for a route template). Absent: `resource`.
   */
  probeUrl?: string | undefined;
}

export type Declaration =
  | { kind: "absent" }
  | { kind: "rejected"; reason: string }
  | { kind: "accepted"; draft: CatalogDraft };

const MAX_REASON_LENGTH = 300;
const MAX_TOOL_NAME_LENGTH = 128;
const EXTENSION_KEY = /^[A-Za-z0-9_.:-]{1,64}$/;
const MIME_TYPE = /^[\x21-\x7e]+(?: *; *[\x21-\x7e]+)*$/;

export interface DeclarationPolicy {
  /** Devnet mode: loopback and private hosts are fine. */
  allowPrivateHosts: boolean;
  /**
   * Checks `info` against `schema`; defaults to the official
   * `validateDiscoveryExtension`, which compiles the schema on every call
   * (milliseconds), so callers on the payment path pass a memoized one.
   */
  validateInfo?: (extension: DiscoveryExtension) => ValidationResult;
}

function reject(reason: string): Declaration {
  const short =
    reason.length > MAX_REASON_LENGTH ? `${reason.slice(0, MAX_REASON_LENGTH - 1)}…` : reason;
  return { kind: "rejected", reason: short };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * `pattern` and `patternProperties` would make this service run regular
 * expressions chosen by whoever built the payload; a catastrophic one would
 * stall every request. The catalog refuses them instead.
 */
function findRegexKeyword(node: unknown, depth = 0): string | undefined {
  if (depth > 64) return "nesting deeper than 64 levels";
  if (Array.isArray(node)) {
    for (const item of node) {
      const found = findRegexKeyword(item, depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  if (!isObject(node)) return undefined;
  for (const [key, value] of Object.entries(node)) {
    if ((key === "pattern" && typeof value === "string") || key === "patternProperties") {
      return `keyword "${key}"`;
    }
    const found = findRegexKeyword(value, depth + 1);
    if (found) return found;
  }
  return undefined;
}

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? "", "utf8");
}

function optionalString(
  value: unknown,
  field: string,
  max: number,
): { ok: true; value: string | undefined } | { ok: false; reason: string } {
  if (value === undefined || value === null || value === "") return { ok: true, value: undefined };
  if (typeof value !== "string") return { ok: false, reason: `${field} must be a string` };
  if (value.length > max) {
    return {
      ok: false,
      reason: `${field} is ${value.length} characters; the catalog accepts at most ${max}`,
    };
  }
  return { ok: true, value };
}

export function readDeclaration(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  policy: DeclarationPolicy,
): Declaration {
  const raw = payload.extensions?.[BAZAAR.key];
  if (raw === undefined) return { kind: "absent" };
  // A confidential offer names its merchant (extra.merchant) and pays the
  // privacy vault: a public entry would link the two for anyone to read.
  if (requirements.extra?.["confidential"] === true) {
    return reject(
      "a confidential offer is not cataloged: the public catalog would name its merchant",
    );
  }
  if (!isObject(raw) || !isObject(raw["info"]) || !isObject(raw["schema"])) {
    return reject("extensions.bazaar must be an object with an info object and a schema object");
  }
  const size = byteLength(raw);
  if (size > MAX_DECLARATION_BYTES) {
    return reject(
      `extensions.bazaar is ${size} bytes; the catalog accepts declarations of at most ${MAX_DECLARATION_BYTES}`,
    );
  }
  const regex = findRegexKeyword(raw["schema"]);
  if (regex) {
    return reject(
      `extensions.bazaar.schema uses ${regex}; this catalog does not run regular expressions from payloads`,
    );
  }
  const spec = validateDiscoveryExtensionSpec(raw);
  if (!spec.valid) {
    return reject(`extensions.bazaar does not follow the bazaar spec: ${spec.errors?.join("; ")}`);
  }
  const validateInfo = policy.validateInfo ?? validateDiscoveryExtension;
  const matches = validateInfo(raw as unknown as DiscoveryExtension);
  if (!matches.valid) {
    return reject(
      `extensions.bazaar.info does not match its schema: ${matches.errors?.join("; ")}`,
    );
  }

  const resource = payload.resource;
  const url = checkResourceUrl(resource?.url, policy.allowPrivateHosts);
  if (!url.ok) return reject(url.reason);
  const description = optionalString(
    resource?.description,
    "resource.description",
    MAX_DESCRIPTION_LENGTH,
  );
  if (!description.ok) return reject(description.reason);
  const mimeType = optionalString(resource?.mimeType, "resource.mimeType", MAX_MIME_TYPE_LENGTH);
  if (!mimeType.ok) return reject(mimeType.reason);
  if (mimeType.value !== undefined && !MIME_TYPE.test(mimeType.value)) {
    return reject("resource.mimeType must be a media type such as application/json");
  }

  const accept: PaymentRequirements = {
    scheme: requirements.scheme,
    network: requirements.network,
    asset: requirements.asset,
    amount: requirements.amount,
    payTo: requirements.payTo,
    maxTimeoutSeconds: requirements.maxTimeoutSeconds,
    extra: requirements.extra ?? {},
  };
  const acceptSize = byteLength(accept);
  if (acceptSize > MAX_ACCEPT_BYTES) {
    return reject(
      `paymentRequirements is ${acceptSize} bytes; the catalog stores payment kinds of at most ${MAX_ACCEPT_BYTES}`,
    );
  }

  // Validation ran above with reasons; the official extractor now builds
  // the canonical entry (route template, sanitized service metadata).
  const found = extractDiscoveryInfo(
    { ...payload, resource: { ...resource!, url: url.url.href } },
    requirements,
    false,
  );
  if (!found) return reject("extensions.bazaar carries no discovery info");
  // A route template replaces the path, so the canonical URL is checked too.
  const canonical = checkResourceUrl(found.resourceUrl, policy.allowPrivateHosts);
  if (!canonical.ok) return reject(canonical.reason);

  let toolName = "";
  let toolDescription: string | undefined;
  if ("toolName" in found) {
    if (found.toolName.length > MAX_TOOL_NAME_LENGTH || /[\x00-\x1f\x7f]/.test(found.toolName)) {
      return reject(
        `info.input.toolName must be at most ${MAX_TOOL_NAME_LENGTH} printable characters`,
      );
    }
    toolName = found.toolName;
    const input = found.discoveryInfo.input as { description?: unknown };
    const own = optionalString(input.description, "info.input.description", MAX_DESCRIPTION_LENGTH);
    if (!own.ok) return reject(own.reason);
    toolDescription = own.value;
  }
  const routeTemplate =
    typeof raw["routeTemplate"] === "string" && isValidRouteTemplate(raw["routeTemplate"])
      ? raw["routeTemplate"]
      : undefined;
  const extensionKeys = Object.keys(payload.extensions ?? {})
    .filter((k) => EXTENSION_KEY.test(k))
    .slice(0, MAX_EXTENSION_KEYS);

  return {
    kind: "accepted",
    draft: {
      resource: found.resourceUrl,
      toolName,
      type: found.discoveryInfo.input.type,
      x402Version: found.x402Version,
      method: "method" in found ? found.method : undefined,
      description: description.value ?? toolDescription,
      mimeType: mimeType.value,
      serviceName: found.serviceName,
      tags: found.tags,
      iconUrl: found.iconUrl,
      accept,
      extensionKeys,
      bazaar: {
        info: raw["info"],
        schema: raw["schema"],
        ...(routeTemplate ? { routeTemplate } : {}),
      },
      probeUrl: `${url.url.origin}${url.url.pathname}`,
    },
  };
}
