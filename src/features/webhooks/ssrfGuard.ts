/**
 * SSRF guard for webhook targets. A URL is refused when its host is, or
 * resolves to, a private, loopback, link-local, unique-local, unspecified or
 * otherwise non-public address, unless private targets are allowed by
 * configuration (WEBHOOK_ALLOW_PRIVATE_TARGETS=true).
 *
 * It is checked when an endpoint is set, and again at every delivery through
 * `guardedLookup`, which the HTTP request uses to resolve the host: the
 * address checked is the address connected to, so a DNS answer that changes
 * between the two (rebinding) cannot slip through.
 *
 * A refusal never says what a host resolved to, nor tells a host that does
 * not resolve from one that resolves privately: both go back to the account
 * (the dashboard's answer, the delivery log), and either would let it map
 * the internal DNS. They get one message.
 */
import { BlockList, isIP } from "node:net";
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { promisify } from "node:util";

const blocked = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8], // "this network", unspecified
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(net, bits, "ipv4");
}
for (const [net, bits] of [
  ["::", 128], // unspecified
  ["::1", 128], // loopback
  ["fc00::", 7], // unique-local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
  ["64:ff9b::", 96], // NAT64 of an IPv4 address
  ["64:ff9b:1::", 48], // local-use NAT64 (RFC 8215)
  ["fec0::", 10], // site-local (deprecated, still routed inside some networks)
  ["2001:db8::", 32], // documentation
  ["100::", 64], // discard-only
] as const) {
  blocked.addSubnet(net, bits, "ipv6");
}

export class WebhookTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookTargetError";
  }
}

/** The one refusal for a host that does not resolve, or not to public addresses only. */
function notPublic(host: string): WebhookTargetError {
  return new WebhookTargetError(
    `${host} is not allowed: webhooks may not reach hosts that are private, loopback or link-local, or that do not resolve (WEBHOOK_ALLOW_PRIVATE_TARGETS=true allows private ones)`,
  );
}

/** The eight 16-bit groups of an IPv6 address (any textual form Node accepts). */
function ipv6Groups(address: string): number[] | undefined {
  let host: string;
  try {
    // The URL parser normalises every form (embedded dotted quads included).
    host = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
  const [head, tail] = host.includes("::") ? host.split("::") : [host, undefined];
  const parse = (part: string | undefined) =>
    part ? part.split(":").map((g) => parseInt(g, 16)) : [];
  const left = parse(head);
  const right = parse(tail);
  const zeros = tail === undefined ? [] : Array<number>(8 - left.length - right.length).fill(0);
  const groups = [...left, ...zeros, ...right];
  return groups.length === 8 && groups.every((g) => Number.isInteger(g)) ? groups : undefined;
}

const dotted = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * The IPv4 address an IPv6 address carries, in every form that reaches an
 * IPv4 host: IPv4-compatible (`::a.b.c.d`), IPv4-mapped (`::ffff:a.b.c.d`),
 * IPv4-translated (`::ffff:0:a.b.c.d`), 6to4 (`2002:AABB:CCDD::/48`) and
 * Teredo (`2001:0::/32`, client address inverted).
 */
function embeddedIpv4(g: number[]): string | undefined {
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 6)) return dotted(g[6]!, g[7]!);
  if (zero(0, 5) && g[5] === 0xffff) return dotted(g[6]!, g[7]!);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return dotted(g[6]!, g[7]!);
  if (g[0] === 0x2002) return dotted(g[1]!, g[2]!);
  if (g[0] === 0x2001 && g[1] === 0) return dotted(g[6]! ^ 0xffff, g[7]! ^ 0xffff);
  return undefined;
}

/** True when the address is not a public unicast address. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, "ipv4");
  if (family === 6) {
    if (blocked.check(address, "ipv6")) return true;
    const groups = ipv6Groups(address);
    if (!groups) return true;
    const v4 = embeddedIpv4(groups);
    return v4 !== undefined && blocked.check(v4, "ipv4");
  }
  return true; // not an address at all: refuse
}

/** Parses and checks the form of a webhook URL (no DNS). */
function parseWebhookUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookTargetError(`"${raw}" is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new WebhookTargetError("the webhook URL must be http:// or https://");
  if (url.username || url.password)
    throw new WebhookTargetError("the webhook URL must not contain credentials");
  if (raw.length > 2048) throw new WebhookTargetError("the webhook URL is longer than 2048");
  return url;
}

const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, "$1");

const lookupAll = promisify(dnsLookup) as unknown as (
  host: string,
  opts: { all: true },
) => Promise<LookupAddress[]>;

/** Refuses a URL whose host is or resolves to a non-public address. */
export async function assertPublicTarget(raw: string, allowPrivate: boolean): Promise<URL> {
  const url = parseWebhookUrl(raw);
  if (allowPrivate) return url;
  const host = hostOf(url);
  const addresses = isIP(host)
    ? [host]
    : (
        await lookupAll(host, { all: true }).catch(() => {
          throw notPublic(host);
        })
      ).map((a) => a.address);
  if (addresses.length === 0 || addresses.some(isPrivateAddress)) throw notPublic(host);
  return url;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** A `lookup` for http.request that refuses non-public answers. */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      // The delivery log shows this error to the account: with the guard
      // on, a failed lookup reads like a private answer (see the top).
      if (err) return callback(allowPrivate ? err : notPublic(hostname), []);
      const list = addresses;
      const bad = allowPrivate ? undefined : list.find((a) => isPrivateAddress(a.address));
      if (bad || list.length === 0) return callback(notPublic(hostname), []);
      if (options.all) return callback(null, list);
      callback(null, list[0]!.address, list[0]!.family);
    });
  };
}
