/**
 * GET /health (liveness: the process answers) and GET /ready (readiness: the
 * database, each network's RPC and Redis answer). A load balancer restarts
 * on /health and routes on /ready. Neither needs a key, so /ready shows
 * only what is up or down (the details are in the log: readiness.ts).
 */
import type { FastifyInstance } from "fastify";
import { publicReadiness, type ReadinessReport } from "../../features/health/readiness.js";
import { sendError } from "../errorEnvelope.js";

export function registerHealthRoutes(
  app: FastifyInstance,
  deps: { mode: string; readiness: () => Promise<ReadinessReport> },
): void {
  app.get("/health", async () => ({ status: "ok", mode: deps.mode }));
  app.get("/ready", async (_request, reply) => {
    const report = await deps.readiness();
    const shown = publicReadiness(report);
    if (report.ready) return reply.send({ status: "ready", ...shown });
    const down = [
      ...(report.database.ok ? [] : ["the database"]),
      ...report.networks.filter((n) => !n.reachable).map((n) => `the ${n.network} RPC`),
      ...(report.redis && !report.redis.ok ? ["Redis"] : []),
    ];
    reply.header("Retry-After", "5");
    return sendError(reply, "service_unavailable", `not ready: ${down.join(", ")} unreachable`, {
      status: "not_ready",
      ...shown,
    });
  });
}
