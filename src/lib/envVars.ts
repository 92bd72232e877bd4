/**
 * Reading environment variables the same way everywhere: the service's own
 * configuration (src/config) and each chain family's (src/chains/<f>/config.ts)
 * parse their variables with these, so every bad value stops the process with
 * a message that names the variable, and no secret is ever echoed.
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { ConfigError } from "./configError.js";

/** A whole number within bounds, or the fallback when unset or blank. */
export function intVar(name: string, min: number, max: number, fallback: number) {
  return z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === "") return fallback;
      const n = Number(v);
      if (!Number.isInteger(n) || n < min || n > max) {
        ctx.addIssue({
          code: "custom",
          message: `${name} must be a whole number from ${min} to ${max}, got "${v}"`,
        });
        return z.NEVER;
      }
      return n;
    });
}

/** The zod issues as one line naming each variable. */
function formatIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join(".") || "env"}: ${i.message}`).join("; ");
}

/** Parses `env` with `schema`, or throws a ConfigError naming every bad variable. */
export function parseEnv<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv): z.output<T> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) throw new ConfigError(formatIssues(parsed.error));
  return parsed.data;
}

/** Reads a secret from VAR, or from the file named by VAR_FILE (never both). */
export function readSecret(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const inline = env[name];
  const file = env[`${name}_FILE`];
  if (inline && file) throw new ConfigError(`set either ${name} or ${name}_FILE, not both`);
  if (file) {
    try {
      return readFileSync(file, "utf8");
    } catch (e) {
      throw new ConfigError(`${name}_FILE: cannot read ${file} (${(e as Error).message})`);
    }
  }
  return inline;
}

/** The entries of a key list: comma-, space- or line-separated, `#` comments dropped. */
export function listEntries(raw: string | undefined): string[] {
  if (!raw) return [];
  return raw
    .split("\n")
    .map((line) => line.replace(/#.*$/, ""))
    .flatMap((line) => line.split(/[\s,]+/))
    .map((k) => k.trim())
    .filter((k) => k.length > 0);
}

/** A whole number of milliseconds of at least `min`, or undefined when unset. */
export function optionalMs(name: string, raw: string | undefined, min: number): number | undefined {
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min)
    throw new ConfigError(`${name} must be a whole number of milliseconds, at least ${min}`);
  return n;
}

/**
 * One environment variable as docs/configuration.md lists it. Each parser
 * keeps a catalogue of these beside the code that reads them, so the
 * reference is generated from the code (`npm run docs:config`) and a test
 * fails when a variable is read but not catalogued.
 */
export interface ConfigVariable {
  /**
   * The variable's name, or a pattern with a placeholder in angle brackets
   * for a family of names: `EVM_RPC_URLS_<chainId>`.
   */
  readonly name: string;
  /** What applies when it is unset, as a person reads it (`60000`, "3 block times"). */
  readonly default?: string;
  /** What it does, in a sentence or a few; Markdown. */
  readonly description: string;
  /**
   * A key or password: never logged or echoed in an error, and it may be
   * given instead as a file whose path is in `<name>_FILE` (one or the
   * other, not both).
   */
  readonly secret?: boolean;
  /** A value to copy, as `NAME=value`. */
  readonly example?: string;
}
