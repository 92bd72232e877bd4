/**
 * Which resource URLs may enter the public catalog: absolute http(s) URLs of
 * bounded length, without credentials, and (outside devnet mode) on a host a
 * stranger could reach, so the catalog cannot be filled with loopback or
 * private-network addresses.
 */
import { BlockList, isIP } from "node:net";
import { MAX_RESOURCE_URL_LENGTH } from "./limits.js";

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
] as const) {
  NON_PUBLIC.addSubnet(net, prefix, "ipv6");
}

function isNonPublicHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, "");
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  const family = isIP(host);
  if (family === 4) return NON_PUBLIC.check(host, "ipv4");
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host);
    return mapped ? NON_PUBLIC.check(mapped[1]!, "ipv4") : NON_PUBLIC.check(host, "ipv6");
  }
  // A single label ("intranet") resolves only inside some private network.
  return !host.includes(".");
}

/**
 * @param allowPrivateHosts devnet mode: resource servers run on loopback.
 */
export function checkResourceUrl(raw: unknown, allowPrivateHosts: boolean): UrlCheck {
  if (typeof raw !== "string" || raw.length === 0) {
    return { ok: false, reason: "paymentPayload.resource.url is required to catalog a resource" };
  }
  if (raw.length > MAX_RESOURCE_URL_LENGTH) {
    return {
      ok: false,
      reason: `resource.url is ${raw.length} characters; the catalog accepts at most ${MAX_RESOURCE_URL_LENGTH}`,
    };
  }
  if (/[\s\x00-\x1f\x7f]/.test(raw)) {
    return { ok: false, reason: "resource.url must not contain spaces or control characters" };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "resource.url is not an absolute URL" };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return {
      ok: false,
      reason: `resource.url must be an http or https URL, not ${url.protocol.replace(/:$/, "")}`,
    };
  }
  if (url.username !== "" || url.password !== "") {
    return { ok: false, reason: "resource.url must not carry a user name or password" };
  }
  if (!allowPrivateHosts && isNonPublicHost(url.hostname)) {
    return {
      ok: false,
      reason: `resource.url host ${url.hostname} is not publicly reachable (loopback, private or single-label)`,
    };
  }
  return { ok: true, url };
}
