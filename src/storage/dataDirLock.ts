/**
 * PGlite is an embedded database: two processes opening one data directory
 * would corrupt it. A pid file guards the directory; a stale one (its process
 * is gone, e.g. after a crash) is taken over.
 */
import { openSync, closeSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The directory is held by another live process: `pid`. */
export class DataDirInUseError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number,
  ) {
    super(
      `the embedded database in ${dir} is in use by process ${pid}; stop it first, or set DATABASE_URL to share a PostgreSQL server`,
    );
    this.name = "DataDirInUseError";
  }
}

export function lockDataDir(dir: string): () => void {
  const file = join(dir, "facilitator.pid");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(file, "utf8").trim() === String(process.pid)) unlinkSync(file);
        } catch {
          // already gone
        }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const pid = Number(readFileSync(file, "utf8").trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new DataDirInUseError(dir, pid);
      }
      unlinkSync(file);
    }
  }
  throw new Error(`could not lock ${dir}`);
}
