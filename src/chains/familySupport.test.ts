/**
 * A recent chain read is shared by everyone who asks within its age, and a
 * failed read is not kept: the next caller asks the node again.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { RecentRead } from "./familySupport.js";

test("concurrent callers share one read; a failed read is asked again", async () => {
  let calls = 0;
  let fail = true;
  const read = new RecentRead(async () => {
    calls++;
    if (fail) throw new Error("node down");
    return calls;
  }, 60_000);
  await assert.rejects(Promise.all([read.get(), read.get(), read.get()]), /node down/);
  assert.equal(calls, 1, "three callers, one read");
  fail = false;
  assert.deepEqual(await Promise.all([read.get(), read.get()]), [2, 2]);
  assert.equal(calls, 2, "the failure was forgotten, the success is kept");
});
