// A node:test reporter that prints only the closing line "N passed, N failed"
// (plus ", N skipped" when any were skipped), counting leaf tests.
export default async function* summaryReporter(source) {
  const counts = { passed: 0, failed: 0, skipped: 0 };
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const d = event.data;
    // Suites report too; count only tests (leaf nodes).
    if (d.details?.type === "suite") continue;
    if (event.type === "test:pass") {
      if (d.skip || d.todo) counts.skipped++;
      else counts.passed++;
    } else counts.failed++;
  }
  yield `\n${summaryLine(counts)}\n`;
}

/** The closing line, e.g. "154 passed, 0 failed" (scripts/run-tests.mjs adds lanes up with it). */
export function summaryLine({ passed, failed, skipped }) {
  return `${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`;
}

/** The counts of the last closing line in `text`; undefined when there is none. */
export function parseSummary(text) {
  const lines = text.trim().split("\n");
  const m = /^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$/.exec(lines.at(-1) ?? "");
  return m ? { passed: Number(m[1]), failed: Number(m[2]), skipped: Number(m[3] ?? 0) } : undefined;
}
