// A node:test reporter that prints only the closing line "N passed, N failed"
// (plus ", N skipped" when any were skipped), counting leaf tests.
export default async function* summaryReporter(source) {
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const d = event.data;
    // Suites report too; count only tests (leaf nodes).
    if (d.details?.type === "suite") continue;
    if (event.type === "test:pass") {
      if (d.skip || d.todo) skipped++;
      else passed++;
    } else failed++;
  }
  yield `\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`;
}
