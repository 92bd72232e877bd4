import { test } from "node:test";
import assert from "node:assert/strict";
import { parseConfidentialConfig } from "./confidential.js";
import { ConfigError } from "../lib/configError.js";

const A = (n: number) => `0x${n.toString(16).padStart(40, "0")}`;
const FULL = {
  CONFIDENTIAL_CONTRACT_ADDRESS: A(1),
  CONFIDENTIAL_ACL_ADDRESS: A(2),
  CONFIDENTIAL_EXECUTOR_ADDRESS: A(3),
  CONFIDENTIAL_KMS_VERIFIER_ADDRESS: A(4),
  CONFIDENTIAL_INPUT_VERIFIER_ADDRESS: A(5),
  CONFIDENTIAL_DECRYPTION_ADDRESS: A(6),
  CONFIDENTIAL_INPUT_VERIFICATION_ADDRESS: A(7),
  CONFIDENTIAL_RELAYER_URL: "https://relayer.example",
  CONFIDENTIAL_RELAYER_API_KEY: "relayer-key",
  CONFIDENTIAL_GATEWAY_CHAIN_ID: "261131",
  CONFIDENTIAL_OPERATOR_KEY: `0x${"11".repeat(32)}`,
};
const parse = (env: Record<string, string>) => parseConfidentialConfig(env, (name) => env[name]);

test("confidential settlement: off when nothing is set, complete when everything is", () => {
  assert.equal(parse({}), undefined);
  const c = parse(FULL)!;
  assert.equal(c.contractAddress, A(1));
  assert.equal(c.fhevm.executorAddress, A(3));
  assert.equal(c.fhevm.gatewayChainId, 261131);
  assert.equal(c.fhevm.relayerApiKey, "relayer-key");
});

test("confidential settlement in production refuses to start without the relayer's key, saying what is missing", () => {
  const { CONFIDENTIAL_RELAYER_API_KEY: _key, ...noKey } = FULL;
  assert.throws(
    () => parse(noKey),
    (e: unknown) =>
      e instanceof ConfigError &&
      /cannot start in production without Zama's fhEVM on eip155:8453/.test(e.message) &&
      /CONFIDENTIAL_RELAYER_API_KEY/.test(e.message),
  );
});

test("confidential settlement: a partial or malformed configuration names the variable, never a key", () => {
  const { CONFIDENTIAL_RELAYER_URL: _relayer, ...partial } = FULL;
  assert.throws(() => parse(partial), /CONFIDENTIAL_RELAYER_URL/);
  assert.throws(
    () => parse({ ...FULL, CONFIDENTIAL_OPERATOR_KEY: "0xnothex" }),
    (e: unknown) =>
      e instanceof ConfigError &&
      /CONFIDENTIAL_OPERATOR_KEY/.test(e.message) &&
      !e.message.includes("nothex"),
  );
  assert.throws(
    () => parse({ ...FULL, CONFIDENTIAL_ACL_ADDRESS: "0x12" }),
    /CONFIDENTIAL_ACL_ADDRESS/,
  );
});
