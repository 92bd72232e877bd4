/**
 * The proof checker's only way out to the network: one request to a
 * resource server, through the webhooks' SSRF guard (features/webhooks/
 * ssrfGuard.ts), so a catalog entry can never make this service reach a
 * private, loopback, link-local or otherwise non-public address:
 * - a literal IP host is checked before connecting;
 * - a host name is resolved by `guardedLookup`, which refuses non-public
 *   answers, so the address checked is the address connected to (no DNS
 *   rebinding between check and connect);
 * - redirects are never followed (a 3xx is simply "not a 402");
 * - every request has a timeout, and at most `maxBytes` of a body is read.
 * Private targets are allowed only in devnet mode (resource servers there
 * run on loopback), as the catalog allows their URLs only then.
 *
 * What a resource's 402 says is read the x402 way: the `PAYMENT-REQUIRED`
 * header (base64 JSON, x402 v2) and the JSON body (`accepts`, as v1 and
 * many v2 servers also send it); the offers' `network` and `payTo` are all
 * the checker needs.
 */
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { guardedLookup, isPrivateAddress } from "../webhooks/ssrfGuard.js";

export interface ProbeOptions {
  /** Devnet mode: loopback and private targets may be fetched. */
  allowPrivateTargets: boolean;
  timeoutMs: number;
  /** Bytes of a body read at most; the rest is not downloaded. */
  maxBytes: number;
}

/** One payment offer of a 402 answer, as far as ownership goes. */
interface Offer {
  network: string;
  payTo: string;
}

type FetchOutcome =
  | {
      ok: true;
      status: number;
      headers: http.IncomingHttpHeaders;
      body: Buffer;
      truncated: boolean;
    }
  | { ok: false; error: string };

export type ProbeResult =
  /** The resource answered 402; `offers` are the ones it named (maybe none readable). */
  { answered402: true; offers: Offer[] } | { answered402: false; error: string };

const USER_AGENT = "x402-facilitator-catalog/1 (catalog ownership check)";
/** Offers read from one answer at most: enough for any real resource. */
const MAX_OFFERS = 32;
/**
 * One message for every refused target, whatever the reason (private,
 * loopback, unresolvable): it is shown to the account, and telling them
 * apart would map the internal network (see ssrfGuard.ts).
 */
export const REFUSED_TARGET =
  "refused: the resource's host is private, loopback or link-local, or does not resolve";

/** The path where an account publishes its challenge on a resource's origin. */
export const CHALLENGE_PATH = "/.well-known/x402-catalog";

/** One request through the SSRF guard; never throws. */
function guardedFetch(raw: string, method: string, opts: ProbeOptions): Promise<FetchOutcome> {
  let target: URL;
  try {
    target = new URL(raw);
  } catch {
    return Promise.resolve({ ok: false, error: "not a URL" });
  }
  if (target.protocol !== "http:" && target.protocol !== "https:") {
    return Promise.resolve({ ok: false, error: "not an http or https URL" });
  }
  if (target.username !== "" || target.password !== "") {
    return Promise.resolve({ ok: false, error: "the URL carries credentials" });
  }
  const host = target.hostname.replace(/^\[(.*)\]$/, "$1");
  // A literal IP is connected to without a lookup: check it here.
  if (!opts.allowPrivateTargets && isIP(host) && isPrivateAddress(host)) {
    return Promise.resolve({ ok: false, error: REFUSED_TARGET });
  }
  return new Promise<FetchOutcome>((resolve) => {
    let settled = false;
    const finish = (outcome: FetchOutcome) => {
      if (!settled) {
        settled = true;
        resolve(outcome);
      }
    };
    const lib = target.protocol === "https:" ? https : http;
    const req = lib.request(
      target,
      {
        method,
        headers: {
          "user-agent": USER_AGENT,
          accept: "application/json, text/plain;q=0.9, */*;q=0.1",
          "content-length": "0",
        },
        lookup: guardedLookup(opts.allowPrivateTargets) as never,
        timeout: opts.timeoutMs,
        signal: AbortSignal.timeout(opts.timeoutMs),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (truncated: boolean) =>
          finish({
            ok: true,
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            truncated,
          });
        res.on("data", (chunk: Buffer) => {
          if (settled) return;
          const room = opts.maxBytes - size;
          if (chunk.length > room) {
            if (room > 0) chunks.push(chunk.subarray(0, room));
            size = opts.maxBytes;
            done(true);
            res.destroy();
            return;
          }
          chunks.push(chunk);
          size += chunk.length;
        });
        res.on("end", () => done(false));
        // Cut short (timeout, reset): what arrived, marked incomplete.
        res.on("error", () => done(true));
        res.on("close", () => done(true));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`timed out after ${opts.timeoutMs} ms`)));
    req.on("error", (e: Error) => {
      const refused = e.name === "WebhookTargetError";
      finish({ ok: false, error: refused ? REFUSED_TARGET : describeNetworkError(e) });
    });
    req.end();
  });
}

function describeNetworkError(e: Error): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (e.name === "AbortError" || e.name === "TimeoutError") return "timed out";
  return (code ? `${code}: ` : "") + (e.message || "request failed").slice(0, 200);
}

/** Fetches a resource as a client without a payment would, and reads its 402. */
export async function probeResource(
  url: string,
  method: string,
  opts: ProbeOptions,
): Promise<ProbeResult> {
  const res = await guardedFetch(url, method, opts);
  if (!res.ok) return { answered402: false, error: res.error };
  if (res.status !== 402) {
    return { answered402: false, error: `answered HTTP ${res.status}, not 402` };
  }
  return { answered402: true, offers: offersOf(res) };
}

/**
 * The challenge tokens published on an origin: the lines of
 * `/.well-known/x402-catalog` (a 2xx answer), trimmed; undefined when there
 * is no such file.
 */
export async function fetchChallenges(
  origin: string,
  opts: ProbeOptions,
): Promise<Set<string> | undefined> {
  const res = await guardedFetch(`${origin}${CHALLENGE_PATH}`, "GET", opts);
  if (!res.ok || res.status < 200 || res.status > 299) return undefined;
  return new Set(
    res.body
      .toString("utf8")
      .split(/\r?\n/)
      .map((line) => line.trim())
      .filter((line) => line.length > 0 && line.length <= 200),
  );
}

/** Offers named by a 402 answer's PAYMENT-REQUIRED header and JSON body, deduplicated. */
function offersOf(res: {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  truncated: boolean;
}): Offer[] {
  const found: Offer[] = [];
  const header = res.headers["payment-required"];
  if (typeof header === "string") found.push(...acceptsOf(parseBase64Json(header)));
  // A body cut at the size limit is not JSON anyone can trust: ignored.
  if (!res.truncated && res.body.length > 0) found.push(...acceptsOf(parseJson(res.body)));
  const seen = new Set<string>();
  return found
    .filter((o) => {
      const key = `${o.network}\n${o.payTo}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .slice(0, MAX_OFFERS);
}

function parseBase64Json(value: string): unknown {
  if (!/^[A-Za-z0-9+/=_-]+$/.test(value.trim())) return undefined;
  return parseJson(Buffer.from(value.trim(), "base64"));
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
}

function acceptsOf(doc: unknown): Offer[] {
  if (typeof doc !== "object" || doc === null) return [];
  const accepts = (doc as { accepts?: unknown }).accepts;
  if (!Array.isArray(accepts)) return [];
  const offers: Offer[] = [];
  for (const a of accepts.slice(0, MAX_OFFERS)) {
    if (typeof a !== "object" || a === null) continue;
    const { network, payTo } = a as { network?: unknown; payTo?: unknown };
    if (typeof network !== "string" || typeof payTo !== "string") continue;
    if (network.length === 0 || network.length > 64 || payTo.length === 0 || payTo.length > 256)
      continue;
    offers.push({ network, payTo });
  }
  return offers;
}
