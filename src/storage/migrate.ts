/**
 * Versioned migrations: numbered `.sql` files in `migrations/`, applied in
 * order at start by Kysely's Migrator, which records them and takes a lock,
 * so several replicas starting together apply each file once.
 */
import { readdir, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from "kysely";

const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations/", import.meta.url));

/** Splits a file into statements at semicolons that end a line. */
export function splitStatements(text: string): string[] {
  // A function body between $$ quotes has line-ending semicolons of its
  // own: pieces are joined back until the $$ quotes are balanced.
  const pieces: string[] = [];
  let open = "";
  for (const piece of text.split(/;\s*$/m)) {
    open = open ? `${open};${piece}` : piece;
    if ((open.match(/\$\$/g)?.length ?? 0) % 2 === 0) {
      pieces.push(open);
      open = "";
    }
  }
  if (open) pieces.push(open);
  return pieces.map((s) => s.replace(/^\s*--.*$/gm, "").trim()).filter((s) => s.length > 0);
}

class SqlFileMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    const files = (await readdir(MIGRATIONS_DIR)).filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort();
    const out: Record<string, Migration> = {};
    for (const file of files) {
      const text = await readFile(MIGRATIONS_DIR + file, "utf8");
      out[file.replace(/\.sql$/, "")] = {
        async up(db: Kysely<unknown>) {
          for (const statement of splitStatements(text)) await sql.raw(statement).execute(db);
        },
      };
    }
    return out;
  }
}

export async function migrateToLatest(db: Kysely<unknown>): Promise<string[]> {
  // Unordered: a migration numbered below one already applied (two features
  // landing in different releases) is applied rather than refused.
  const migrator = new Migrator({
    db,
    provider: new SqlFileMigrationProvider(),
    allowUnorderedMigrations: true,
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === "Error")?.migrationName ?? "unknown";
    throw new Error(`database migration ${failed} failed: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return (results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}
