// What keeps a file out of the unit lane (scripts/run-tests.mjs): the unit
// lane does no I/O, so a test that starts a database or a chain belongs to
// the integration lane (named *.integration.test.ts beside the code).

/**
 * A database or anvil is known by the call that opens it; every other
 * family's local ledger (and anything else of the devnet) by an import of
 * `devnet/`, so a new family's ledger is caught without being named here.
 */
const STARTS_IO = /\b(openMigratedDb|openDb|PGliteThread|new PGlite|startDevnet|startAnvil)\b/;
const IMPORTS_DEVNET = /(?:\bfrom\s*|\bimport\s*\(\s*)["'](?:\.\.?\/)+devnet\//;

/** Why a test's source keeps it out of the unit lane, or undefined when nothing does. */
export function ioIn(source) {
  if (IMPORTS_DEVNET.test(source)) return "imports devnet/";
  const start = STARTS_IO.exec(source);
  return start ? `calls ${start[1]}` : undefined;
}
