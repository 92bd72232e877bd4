import { test } from "node:test";
import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import {
  assertPublicTarget,
  guardedLookup,
  isPrivateAddress,
  WebhookTargetError,
} from "./ssrfGuard.js";

test("private, loopback, link-local, unique-local and unspecified addresses are private", () => {
  for (const a of [
    "10.0.0.1",
    "10.255.255.255",
    "127.0.0.1",
    "127.1.2.3",
    "169.254.169.254",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "0.0.0.0",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:10.0.0.1",
  ]) {
    assert.equal(isPrivateAddress(a), true, a);
  }
  for (const a of ["8.8.8.8", "1.1.1.1", "172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
    assert.equal(isPrivateAddress(a), false, a);
  }
  assert.equal(isPrivateAddress("not-an-ip"), true);
});

test("webhook URLs to private targets are refused unless allowed", async () => {
  for (const url of [
    "http://10.1.2.3/hook",
    "http://127.0.0.1:8080/hook",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]:9000/hook",
    "http://localhost:9000/hook",
  ]) {
    await assert.rejects(assertPublicTarget(url, false), WebhookTargetError, url);
    assert.equal((await assertPublicTarget(url, true)).toString(), new URL(url).toString());
  }
  assert.equal(
    (await assertPublicTarget("https://8.8.8.8/hook", false)).hostname,
    "8.8.8.8",
    "a public address literal passes",
  );
  await assert.rejects(assertPublicTarget("ftp://example.com/", true), /http/);
  await assert.rejects(assertPublicTarget("http://user:pw@example.com/", true), /credentials/);
  await assert.rejects(assertPublicTarget("nonsense", true), /not a URL/);
});

test("IPv6 forms that carry a blocked IPv4 address are private too", async () => {
  for (const a of [
    "::127.0.0.1", // IPv4-compatible
    "::7f00:1",
    "::ffff:0:7f00:1", // IPv4-translated
    "::ffff:0:127.0.0.1",
    "::ffff:0:a00:1",
    "2002:7f00:1::", // 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1", // 6to4 of 169.254.169.254
    "2002:c0a8:101::", // 6to4 of 192.168.1.1
    "2001:0:4136:e378:8000:63bf:80ff:fffe", // Teredo of 127.0.0.1
  ]) {
    assert.equal(isPrivateAddress(a), true, a);
  }
  for (const a of ["2002:808:808::", "::ffff:0:808:808", "2001:db9::1"]) {
    assert.equal(isPrivateAddress(a), false, a);
  }
  for (const url of [
    "http://[::127.0.0.1]/h",
    "http://[::ffff:0:7f00:1]/h",
    "http://[2002:7f00:1::]/h",
  ]) {
    await assert.rejects(assertPublicTarget(url, false), WebhookTargetError, url);
  }
});

test("local NAT64, site-local, documentation and discard-only IPv6 ranges are private", () => {
  for (const a of [
    "64:ff9b:1::a00:1", // local-use NAT64 (RFC 8215), 64:ff9b:1::/48
    "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
    "fec0::1", // site-local, fec0::/10
    "feff:ffff::1",
    "2001:db8::1", // documentation, 2001:db8::/32
    "2001:db8:ffff:ffff::1",
    "100::1", // discard-only, 100::/64
    "100::ffff:ffff:ffff:ffff",
  ]) {
    assert.equal(isPrivateAddress(a), true, a);
  }
  for (const a of ["64:ff9b:2::1", "fe7f::1", "2001:db9::1", "100:0:0:1::1"]) {
    assert.equal(isPrivateAddress(a), false, a);
  }
});

test("a refusal never says what the host resolved to, nor whether it resolved at all", async () => {
  const messages: string[] = [];
  for (const url of [
    "http://localhost:9000/hook",
    "http://10.0.3.7/hook",
    "http://[fec0::1]/hook",
    "http://no-such-host.invalid/hook",
  ]) {
    const error = await assertPublicTarget(url, false).then(
      () => assert.fail(`${url} was allowed`),
      (e: unknown) => e,
    );
    assert.ok(error instanceof WebhookTargetError, url);
    // The host as written is echoed back; nothing learnt from DNS is.
    const message = error.message.replace(new URL(url).hostname.replace(/^\[|\]$/g, ""), "HOST");
    assert.match(message, /^HOST is not allowed/, url);
    assert.doesNotMatch(message, /127\.0\.0\.1|::1|resolves to|ENOTFOUND|getaddrinfo/, url);
    messages.push(message);
  }
  assert.equal(new Set(messages).size, 1, "one message for every refusal");

  // At delivery, the connection's own lookup answers the same way.
  const lookup = guardedLookup(false);
  const lookedUp = (host: string) =>
    new Promise<Error | null>((resolve) =>
      lookup(host, { all: true }, (err: Error | null, _a: string | LookupAddress[]) =>
        resolve(err),
      ),
    );
  for (const host of ["localhost", "no-such-host.invalid"]) {
    const err = await lookedUp(host);
    assert.ok(err instanceof WebhookTargetError, host);
    assert.doesNotMatch(err.message, /127\.0\.0\.1|::1|ENOTFOUND|getaddrinfo/, host);
  }
});
