import { test } from "node:test";
import assert from "node:assert/strict";
import { ConfigError } from "../lib/configError.js";
import { parseAuthConfig } from "./auth.js";

const parse = (env: Record<string, string>) =>
  parseAuthConfig(
    { PUBLIC_URL: "https://facilitator.example", ...env },
    "production",
    (name) => env[name],
  );

const github = (id: string, extra: Record<string, string> = {}) => {
  const p = `AUTH_${id.toUpperCase()}_`;
  return {
    [`${p}KIND`]: "github",
    [`${p}CLIENT_ID`]: `${id}-client`,
    [`${p}CLIENT_SECRET`]: `${id}-secret`,
    ...Object.fromEntries(Object.entries(extra).map(([k, v]) => [`${p}${k}`, v])),
  };
};

const GHE = {
  AUTHORIZATION_URL: "https://ghe.example.com/login/oauth/authorize",
  TOKEN_URL: "https://ghe.example.com/login/oauth/access_token",
  API_URL: "https://ghe.example.com/api/v3",
};

test("two GitHub providers on different hosts get different issuers by default", () => {
  const config = parse({
    AUTH_PROVIDERS: "github,ghe",
    ...github("github"),
    ...github("ghe", GHE),
  });
  const issuers = Object.fromEntries(config.providers.map((p) => [p.id, p.issuer]));
  assert.deepEqual(issuers, {
    github: "https://github.com",
    ghe: "https://ghe.example.com",
  });
  // An identity is (issuer, user id): GHE user 12345 is not github.com user 12345.
  assert.notEqual(issuers["github"], issuers["ghe"]);
});

test("an explicit issuer is kept; GitHub's own URLs keep github.com", () => {
  const config = parse({
    AUTH_PROVIDERS: "github,ghe",
    ...github("github"),
    ...github("ghe", { ...GHE, ISSUER: "https://ghe.example.com/enterprise" }),
  });
  assert.deepEqual(
    config.providers.map((p) => [p.id, p.issuer, p.apiUrl]),
    [
      ["github", "https://github.com", "https://api.github.com"],
      ["ghe", "https://ghe.example.com/enterprise", "https://ghe.example.com/api/v3"],
    ],
  );
});

test("two GitHub providers that name one issuer but call different APIs are refused", () => {
  assert.throws(
    () =>
      parse({
        AUTH_PROVIDERS: "github,ghe",
        ...github("github"),
        ...github("ghe", { ...GHE, ISSUER: "https://github.com" }),
      }),
    (e: unknown) =>
      e instanceof ConfigError &&
      /AUTH_GHE_ISSUER/.test(e.message) &&
      /https:\/\/github\.com/.test(e.message),
  );
});
