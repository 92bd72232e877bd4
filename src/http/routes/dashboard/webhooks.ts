/**
 * The Webhooks tab:
 *
 *   GET    /api/webhooks                       the endpoint (secret masked)
 *   PUT    /api/webhooks                       set URL and events (SSRF-checked); a new endpoint's secret is returned once
 *   DELETE /api/webhooks                       remove the endpoint
 *   POST   /api/webhooks/secret                rotate the signing secret (returned once)
 *   POST   /api/webhooks/test                  queue a signed test delivery
 *   GET    /api/webhooks/events                the delivery log
 *   POST   /api/webhooks/events/:id/resend     re-send an event that failed
 */
import type { FastifyInstance } from "fastify";
import type { Dashboard } from "../../../features/dashboard/dashboard.js";
import {
  WEBHOOK_EVENT_TYPES,
  type WebhookEventType,
} from "../../../features/webhooks/endpointSettings.js";
import { WebhookTargetError } from "../../../features/webhooks/ssrfGuard.js";
import { sendError } from "../../errorEnvelope.js";
import { sessionRoute } from "./schemas.js";

const NO_ENDPOINT = "this account has no webhook endpoint: set one with PUT /api/webhooks";

export function registerWebhookRoutes(app: FastifyInstance, deps: { dashboard: Dashboard }): void {
  app.get(
    "/api/webhooks",
    sessionRoute("webhooks", {
      summary: "The webhook endpoint, its events and a hint of its secret",
    }),
    async (request) => ({
      endpoint: (await deps.dashboard.webhook(request.dashboardSession!.accountId)) ?? null,
      eventTypes: WEBHOOK_EVENT_TYPES,
    }),
  );

  app.put(
    "/api/webhooks",
    sessionRoute("webhooks", {
      summary: "Set the webhook endpoint URL and events",
      body: {
        type: "object",
        required: ["url"],
        additionalProperties: false,
        properties: {
          url: { type: "string", minLength: 1, maxLength: 2000 },
          events: {
            type: "array",
            minItems: 1,
            items: { type: "string", enum: [...WEBHOOK_EVENT_TYPES] },
          },
        },
      },
    }),
    async (request, reply) => {
      const body = request.body as { url: string; events?: WebhookEventType[] };
      try {
        return await deps.dashboard.saveWebhook(request.dashboardSession!.accountId, {
          url: body.url.trim(),
          events: body.events ?? [...WEBHOOK_EVENT_TYPES],
        });
      } catch (e) {
        if (e instanceof WebhookTargetError) return sendError(reply, "invalid_request", e.message);
        throw e;
      }
    },
  );

  app.delete(
    "/api/webhooks",
    sessionRoute("webhooks", {
      summary: "Remove the webhook endpoint; undelivered events are dropped",
    }),
    async (request, reply) => {
      const removed = await deps.dashboard.removeWebhook(request.dashboardSession!.accountId);
      if (!removed) return sendError(reply, "not_found", NO_ENDPOINT);
      return { removed: true };
    },
  );

  app.post(
    "/api/webhooks/secret",
    sessionRoute("webhooks", {
      summary: "Rotate the signing secret; the new one is returned once",
    }),
    async (request, reply) => {
      const secret = await deps.dashboard.rotateWebhookSecret(request.dashboardSession!.accountId);
      if (!secret) return sendError(reply, "not_found", NO_ENDPOINT);
      return { secret };
    },
  );

  app.post(
    "/api/webhooks/test",
    sessionRoute("webhooks", { summary: "Queue a signed webhook.test delivery to the endpoint" }),
    async (request, reply) => {
      const eventId = await deps.dashboard.testWebhook(request.dashboardSession!.accountId);
      if (!eventId) return sendError(reply, "not_found", NO_ENDPOINT);
      return reply.status(202).send({ eventId });
    },
  );

  app.get(
    "/api/webhooks/events",
    sessionRoute("webhooks", {
      summary: "Recent events with status, attempts and last response code",
    }),
    async (request) => ({
      events: await deps.dashboard.webhookEvents(request.dashboardSession!.accountId),
    }),
  );

  app.post(
    "/api/webhooks/events/:id/resend",
    sessionRoute("webhooks", {
      summary: "Re-send an event that failed",
      params: {
        type: "object",
        required: ["id"],
        properties: { id: { type: "string", pattern: "^evt_[0-9a-f]{32}$" } },
      },
    }),
    async (request, reply) => {
      const { id } = request.params as { id: string };
      const result = await deps.dashboard.resendWebhookEvent(
        request.dashboardSession!.accountId,
        id,
      );
      if (result === "not_found")
        return sendError(reply, "not_found", `no webhook event ${id} in this account`);
      if (result === "not_failed")
        return sendError(
          reply,
          "conflict",
          `event ${id} has not failed; only failed events are re-sent`,
        );
      return reply.status(202).send({ eventId: id, status: "pending" });
    },
  );
}
