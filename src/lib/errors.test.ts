/** Which errors mean "the database is out of reach": an outage (503), never a 500. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { isDatabaseUnavailable } from "./errors.js";

test("a server shutting down, a refused or cut connection is the database being unavailable", () => {
  const pgError = (code: string) => Object.assign(new Error("pg"), { code });
  assert.equal(isDatabaseUnavailable(pgError("57P01")), true, "admin shutdown");
  assert.equal(isDatabaseUnavailable(pgError("57P03")), true, "cannot connect now");
  assert.equal(isDatabaseUnavailable(pgError("08006")), true, "connection failure");
  assert.equal(isDatabaseUnavailable(pgError("ECONNREFUSED")), true);
  assert.equal(isDatabaseUnavailable(new Error("Connection terminated unexpectedly")), true);
  assert.equal(
    isDatabaseUnavailable(
      new Error("Client has encountered a connection error and is not queryable"),
    ),
    true,
    "a pooled client whose connection broke while PostgreSQL restarted",
  );
  assert.equal(
    isDatabaseUnavailable(new Error("query failed", { cause: pgError("ECONNRESET") })),
    true,
    "found through the cause",
  );
});

test("a refused statement or a bug is not", () => {
  const pgError = (code: string) => Object.assign(new Error("pg"), { code });
  assert.equal(isDatabaseUnavailable(pgError("23505")), false, "unique violation");
  assert.equal(isDatabaseUnavailable(pgError("42P01")), false, "undefined table");
  assert.equal(isDatabaseUnavailable(new TypeError("x is undefined")), false);
  assert.equal(isDatabaseUnavailable(undefined), false);
});
