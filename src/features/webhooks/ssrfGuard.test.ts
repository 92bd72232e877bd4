import { test } from "node:test";
import assert from "node:assert/strict";
import { assertPublicTarget, isPrivateAddress, WebhookTargetError } from "./ssrfGuard.js";

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
