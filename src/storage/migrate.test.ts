import { test } from "node:test";
import assert from "node:assert/strict";
import { splitStatements } from "./migrate.js";

test("statements split at line-ending semicolons; comments are dropped", () => {
  const sql = "-- header\nCREATE TABLE a (x int);\n\n-- note\nCREATE INDEX i ON a (x);\n";
  assert.deepEqual(splitStatements(sql), ["CREATE TABLE a (x int)", "CREATE INDEX i ON a (x)"]);
});

test("a $$-quoted function body stays one statement", () => {
  const sql =
    "CREATE FUNCTION f() RETURNS trigger AS $$\nBEGIN\n  RETURN NEW;\nEND\n$$ LANGUAGE plpgsql;\nCREATE TABLE b (y int);\n";
  assert.deepEqual(splitStatements(sql), [
    "CREATE FUNCTION f() RETURNS trigger AS $$\nBEGIN\n  RETURN NEW;\nEND\n$$ LANGUAGE plpgsql",
    "CREATE TABLE b (y int)",
  ]);
});
