import { test } from "node:test";
import assert from "node:assert/strict";
import { devnetBanner, type DevnetBanner } from "./banner.js";

const base: DevnetBanner = {
  url: "http://127.0.0.1:4020",
  apiKey: "x402_sk_test",
  account: "devnet",
  chains: [
    { network: "eip155:8453", line: "http://127.0.0.1:1   USDC 0x8335…" },
    { network: "near:mainnet", line: "http://127.0.0.1:2   USDC 1720…", example: "near" },
    { network: "xrpl:0", line: "ws://127.0.0.1:3   XRP, RLUSD r…", example: "xrpl" },
  ],
  file: ".devnet/devnet.json",
  dbKind: "pglite",
  dashboard: {
    url: "http://127.0.0.1:4020/dashboard/",
    providers: ["Devnet ID", "Devnet SSO"],
    local: true,
  },
};

/** The banner's lines without blanks and rules: what a person reads. */
const readable = (b: DevnetBanner) =>
  devnetBanner(b)
    .split("\n")
    .filter((l) => l.trim() !== "" && !/^=+$/.test(l));

test("the banner ends with the three things to try, and nothing after them", () => {
  const lines = readable(base);
  const last = lines.slice(-5);
  assert.match(last[0]!, /^ {2}1\. Pay for an API +npx tsx examples\/paid-api\.ts/);
  assert.match(
    last[1]!,
    /npx tsx examples\/pay\.ts \[--network near\|xrpl\] +# terminal 3: pays it$/,
  );
  assert.match(last[2]!, /^ {2}2\. See it paid +http:\/\/127\.0\.0\.1:4020\/dashboard\/$/);
  assert.match(last[3]!, /sign in with Devnet ID or Devnet SSO: any name and password$/);
  assert.match(last[4]!, /^ {2}3\. Read the API +http:\/\/127\.0\.0\.1:4020\/openapi\.json/);
  assert.equal(lines.at(-6), "  Try:");
  assert.ok(lines.some((l) => l.includes('x402_sk_test   (account "devnet")')));
  // It ends on its rule: the last words on the screen are the three things.
  assert.match(devnetBanner(base).trimEnd().split("\n").at(-1)!, /^=+$/);
});

test("on one EVM chain the pay line takes no --network; operator providers are not 'any name'", () => {
  const lines = readable({
    ...base,
    chains: [base.chains[0]!],
    dashboard: { ...base.dashboard, providers: ["Google"], local: false },
  });
  assert.match(lines.at(-4)!, /npx tsx examples\/pay\.ts +# terminal 3/);
  assert.match(lines.at(-2)!, /sign in with Google$/);
});

test("a devnet file elsewhere (a devnet beside another) is named in the example commands", () => {
  const lines = readable({ ...base, file: ".devnet-2/devnet.json" });
  assert.match(
    lines.at(-5)!,
    /1\. Pay for an API +DEVNET_FILE=\.devnet-2\/devnet\.json npx tsx examples\/paid-api\.ts/,
  );
  assert.match(lines.at(-4)!, /^ +DEVNET_FILE=\.devnet-2\/devnet\.json npx tsx examples\/pay\.ts/);
});
