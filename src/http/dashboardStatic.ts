/**
 * Serves the built dashboard (a single-page app) under /dashboard/. Hashed
 * assets are cached for a year; index.html is revalidated every time so a
 * new build shows at once. Any /dashboard/<tab> path is the app itself.
 * Without a build, /dashboard/ says how to make one instead of a blank 404.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance } from "fastify";
import { sendError } from "./errorEnvelope.js";

export async function registerDashboardStatic(app: FastifyInstance, dir: string): Promise<boolean> {
  const root = resolve(dir);
  if (!existsSync(resolve(root, "index.html"))) {
    const notBuilt = async (_request: unknown, reply: Parameters<typeof sendError>[0]) =>
      sendError(
        reply,
        "service_unavailable",
        `the dashboard is not built (no ${dir}/index.html): run \`npm run dashboard:build\`, or \`npm start\`, which builds it`,
      );
    app.get("/dashboard/", { schema: { hide: true } }, notBuilt);
    app.get("/dashboard/*", { schema: { hide: true } }, notBuilt);
    return false;
  }
  await app.register(fastifyStatic, {
    root,
    prefix: "/dashboard/",
    wildcard: false,
    index: false,
    schemaHide: true,
    setHeaders: (res, path) => {
      res.setHeader(
        "cache-control",
        path.includes("/assets/") ? "public, max-age=31536000, immutable" : "no-cache",
      );
    },
  });
  const app_ = async (_request: unknown, reply: { sendFile(f: string): unknown }) =>
    reply.sendFile("index.html");
  app.get("/dashboard", { schema: { hide: true } }, async (_request, reply) =>
    reply.redirect("/dashboard/", 302),
  );
  app.get("/dashboard/", { schema: { hide: true } }, app_);
  app.get("/dashboard/:tab", { schema: { hide: true } }, app_);
  return true;
}
