#!/usr/bin/env node
// What `npm start` runs: the compiled service, built first when dist/ is
// missing or older than a source file. Compiled JavaScript instead of the
// TypeScript loader is the production path: no transform at start and less
// memory (docs/devnet.md gives the figures). `npm run dev` keeps the loader and
// restarts on every change.
//
// The service runs in this same process (an import, not a child), so signals
// reach its own shutdown handlers directly and its exit code is this one.
import { pathToFileURL } from "node:url";
import { build, entry, isStale } from "./build.mjs";

if (isStale()) build();
// Source maps stay off: with them Node reads the map of every module that
// ships one (most of node_modules), about 2.5 s and 30 MB more at start.
// NODE_OPTIONS=--enable-source-maps turns them on for TypeScript line numbers.
await import(pathToFileURL(entry).href);
