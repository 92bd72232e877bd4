import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { redactUrls, redactUrlsDeep } from "./redactUrls.js";

describe("URL redaction in logs", () => {
  test("keeps scheme and host, drops path, query and credentials", () => {
    assert.equal(
      redactUrls(
        "HTTP request failed. URL: https://base-mainnet.g.alchemy.com/v2/SECRETKEY123 Details",
      ),
      "HTTP request failed. URL: https://base-mainnet.g.alchemy.com/… Details",
    );
    assert.equal(
      redactUrls("wss://user:pw@node.example:8546/?key=abc"),
      "wss://node.example:8546/…",
    );
    assert.equal(redactUrls("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
  });

  test("reaches nested fields", () => {
    const out = redactUrlsDeep({ err: { message: "at https://rpc.example/k/SECRET" }, n: 1 });
    assert.deepEqual(out, { err: { message: "at https://rpc.example/…" }, n: 1 });
  });
});
