import { test } from "node:test";
import assert from "node:assert/strict";
import { checkResourceUrl } from "./resourceUrl.js";

test("public http(s) hosts pass, including public IP literals", () => {
  for (const url of [
    "https://api.example.com/weather",
    "http://api.example.com:8080/a/b?c=d",
    "http://8.8.8.8/x",
    "https://[2001:4860:4860::8888]/x",
  ]) {
    const checked = checkResourceUrl(url, false);
    assert.equal(checked.ok, true, url);
  }
});

test("loopback, private, link-local, shared and single-label hosts are refused outside devnet", () => {
  for (const url of [
    "http://localhost/x",
    "http://api.localhost/x",
    "http://127.0.0.53/x",
    "http://0.0.0.0/x",
    "http://192.168.1.10/x",
    "http://172.20.0.1/x",
    "http://169.254.169.254/latest/meta-data",
    "http://100.64.0.1/x",
    "http://[fd00::1]/x",
    "http://[fe80::1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://intranet/x",
  ]) {
    const checked = checkResourceUrl(url, false);
    assert.equal(checked.ok, false, url);
    assert.match((checked as { reason: string }).reason, /not publicly reachable/, url);
    assert.equal(checkResourceUrl(url, true).ok, true, `${url} in devnet mode`);
  }
});

test("control characters and spaces are refused before parsing", () => {
  const checked = checkResourceUrl("https://api.example.com/a b", false);
  assert.deepEqual(checked, {
    ok: false,
    reason: "resource.url must not contain spaces or control characters",
  });
});
