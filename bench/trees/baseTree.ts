/**
 * Another commit of this project, checked out and built beside this one,
 * so a benchmark can run it as a user runs `npm start` and compare.
 *
 * The checkout is a git worktree in the system's temporary directory
 * (`x402-bench-trees/<commit>`), outside this tree so that no test run,
 * linter or type check of this tree ever reads it; it is kept between
 * runs, so a second run only builds again. It shares this
 * tree's `node_modules` when both lockfiles are the same, and installs its
 * own (`npm ci`) when they differ, so each tree runs with the dependencies
 * it was committed with.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export interface BaseTree {
  /** The full commit hash. */
  commit: string;
  /** Its first line, for the report. */
  subject: string;
  dir: string;
}

export function prepareBaseTree(ref: string, say: (line: string) => void): BaseTree {
  const git = (...args: string[]) =>
    execFileSync("git", args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
  let commit: string;
  try {
    commit = git("rev-parse", "--verify", `${ref}^{commit}`);
  } catch {
    throw new Error(`BENCH_BASE=${ref} names no commit of this repository`);
  }
  const subject = git("log", "-1", "--format=%s", commit);
  const dir = join(tmpdir(), "x402-bench-trees", commit.slice(0, 12));
  if (!existsSync(join(dir, "package.json"))) {
    say(`checking out ${commit.slice(0, 12)} beside this tree…`);
    git("worktree", "prune");
    git("worktree", "add", "--detach", "--force", dir, commit);
  }
  if (!existsSync(join(dir, "node_modules"))) {
    const sameLock =
      readFileSync("package-lock.json", "utf8") ===
      readFileSync(join(dir, "package-lock.json"), "utf8");
    if (sameLock) {
      symlinkSync(resolve("node_modules"), join(dir, "node_modules"), "dir");
    } else {
      say(`installing ${commit.slice(0, 12)}'s own dependencies (its lockfile differs)…`);
      execFileSync("npm", ["ci", "--no-audit", "--no-fund"], {
        cwd: dir,
        stdio: ["ignore", "ignore", "inherit"],
      });
    }
  }
  say(`building ${commit.slice(0, 12)} (npm run build)…`);
  execFileSync("npm", ["run", "--silent", "build"], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"],
  });
  return { commit, subject, dir };
}
