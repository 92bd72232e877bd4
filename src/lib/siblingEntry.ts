/**
 * How to start a module that sits beside the caller in a new thread or a new
 * process. Compiled, the sibling is a .js file, started as it is. Under the
 * TypeScript loader (tests, `npm run dev`) it is a .ts file, and on Node 20 a
 * new thread or process does not inherit the loader's hooks: a small start
 * script registers tsx there first, then imports the sibling.
 */
import { Worker, type WorkerOptions } from "node:worker_threads";

export type SiblingEntry = { file: URL } | { script: string };

/** `name` without extension, e.g. `siblingEntry(import.meta.url, "pgliteWorker")`. */
export function siblingEntry(callerUrl: string, name: string): SiblingEntry {
  if (!callerUrl.endsWith(".ts")) return { file: new URL(`./${name}.js`, callerUrl) };
  const sibling = new URL(`./${name}.ts`, callerUrl).href;
  const loader = import.meta.resolve("tsx/esm/api");
  return {
    script: `import(${JSON.stringify(loader)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(sibling)}); });`,
  };
}

/** Starts the sibling module `name` in a new thread. */
export function siblingWorker(callerUrl: string, name: string, options: WorkerOptions): Worker {
  const entry = siblingEntry(callerUrl, name);
  return "file" in entry
    ? new Worker(entry.file, options)
    : new Worker(entry.script, { ...options, eval: true });
}
