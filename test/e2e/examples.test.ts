/**
 * The examples as a person runs them after `npm start`: the devnet with one
 * network of every family, `examples/paid-api.ts`, then `examples/pay.ts
 * --network <family>` for each, every one its own process reading only the
 * devnet file. Each payment gets the API's answer and prints what it paid
 * and the transaction. The start they ran against was quiet: nothing of the
 * devnet's own warned. And the examples read NEAR's entry in both shapes the
 * devnet file has had.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startDevnetService, type DevnetService, type Example } from "../support/devnetService.js";
import { freePort } from "../support/processes.js";
import { FAMILIES, NETWORKS, nameOf, readDevnet, type Family } from "../../examples/devnet.js";

describe("every family's example pays against npm start's devnet", () => {
  let devnet: DevnetService;
  let api: Example;
  let url: string;

  before(async () => {
    devnet = await startDevnetService(Object.values(NETWORKS));
    const port = await freePort();
    url = `http://127.0.0.1:${port}/weather`;
    api = await devnet.example("paid-api.ts", ["--port", String(port)], /pay it: /);
  });
  after(async () => {
    if (devnet) assert.equal(await devnet.stop(), 0, devnet.output());
  });

  test("the start printed no warning: not oidc-provider's, not a log line at warn or above", () => {
    const out = devnet.output();
    assert.doesNotMatch(out, /oidc-provider|WARNING/);
    assert.doesNotMatch(out, /"level":(4|5|6)0/);
  });

  test("the API says where it can be paid: every family the devnet runs", () => {
    for (const family of FAMILIES) {
      assert.match(api.output(), new RegExp(`^  ${nameOf(family)} +${NETWORKS[family]}$`, "m"));
    }
  });

  const expected = {
    eip155: { paid: "0.001 USDC (1000 atomic units)", tx: /^0x[0-9a-f]{64}$/ },
    solana: { paid: "0.001 USDC (1000 atomic units)", tx: /^[1-9A-HJ-NP-Za-km-z]{64,88}$/ },
    near: { paid: "0.001 USDC (1000 atomic units)", tx: /^[1-9A-HJ-NP-Za-km-z]{43,44}$/ },
    xrpl: { paid: "0.001 RLUSD", tx: /^[0-9A-F]{64}$/ },
    starknet: { paid: "0.001 USDC (1000 atomic units)", tx: /^0x[0-9a-f]{1,64}$/ },
  } as const satisfies Record<Family, { paid: string; tx: RegExp }>;

  for (const family of FAMILIES) {
    const want = expected[family];
    test(`pay.ts --network ${nameOf(family)}: 200 with the weather, what it paid and the transaction`, async () => {
      const pay = await devnet.example("pay.ts", ["--network", nameOf(family), url]);
      const code = await pay.exited;
      const out = pay.output();
      assert.equal(code, 0, out);
      const lines = out.trim().split("\n");
      assert.equal(lines[0], `GET ${url}: 200 {"forecast":"sunny","temperatureC":21}`);
      const network = NETWORKS[family].replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      assert.match(
        lines[1]!,
        new RegExp(`^paid ${want.paid.replace(/[()]/g, "\\$&")} on ${network} from \\S+$`),
      );
      assert.match(lines[2]!, /^transaction \S+$/);
      assert.match(lines[2]!.slice("transaction ".length), want.tx);
    });
  }

  test("the 402 a client without a payer gets names every family's option", async () => {
    const res = await fetch(url);
    assert.equal(res.status, 402);
    const required = JSON.parse(
      Buffer.from(res.headers.get("payment-required")!, "base64").toString("utf8"),
    ) as { accepts: { network: string }[] };
    assert.deepEqual(required.accepts.map((a) => a.network).sort(), Object.values(NETWORKS).sort());
  });
});

describe("the examples' devnet reader", () => {
  let dir: string;
  before(() => (dir = mkdtempSync(join(tmpdir(), "examples-devnet-"))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  const write = (name: string, near: object) => {
    const path = join(dir, name);
    const payers = [{ accountId: "payer0.devnet.near", secretKey: "ed25519:x" }];
    writeFileSync(
      path,
      JSON.stringify({
        version: 1,
        facilitatorUrl: "http://127.0.0.1:4020",
        apiKey: "x402_sk_x",
        networks: { "near:mainnet": { rpcUrl: "http://127.0.0.1:1", payers, ...near } },
      }),
    );
    return path;
  };
  const USDC = "17208628f84f5d6ad33f0da3bbbeb27ffcb398eac501a31bd6ad2011e36133a1";

  test("reads NEAR's USDC from a single asset (the first shape) and from an assets map", () => {
    for (const shape of [{ asset: USDC }, { assets: { USDC } }]) {
      const devnet = readDevnet(write(`near-${Object.keys(shape)[0]}.json`, shape));
      assert.deepEqual(devnet.families, ["near"]);
      assert.deepEqual(devnet.entry("near").assets, { USDC });
      assert.equal(devnet.symbolOf("near:mainnet", USDC), "USDC");
    }
  });

  test("says what to do when the devnet is not running or has not announced its key", () => {
    assert.throws(() => readDevnet(join(dir, "absent.json")), /start the devnet first/);
    const early = join(dir, "early.json");
    writeFileSync(early, JSON.stringify({ version: 1, networks: {} }));
    assert.throws(() => readDevnet(early), /wait for npm start's banner/);
  });
});
