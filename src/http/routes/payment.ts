/**
 * POST /verify and POST /settle. A processed payment is always HTTP 200,
 * valid or not; only auth and request-shape problems are HTTP errors.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ExtensionResponses, PaymentService } from "../../features/payments/paymentService.js";
import { Reason } from "../../protocol/reasons.js";
import { settleRefusal, verifyRefusal } from "../../protocol/answers.js";
import type { Metrics } from "../../lib/metrics.js";
import { sendError } from "../errorEnvelope.js";
import { setExtensionResponses } from "../extensionResponses.js";
import { parsePaymentRequestBody } from "../../protocol/envelope.js";
import { RequestLabels } from "../requestLabels.js";

const VERSION_MESSAGE =
  "this facilitator speaks x402 version 2: set x402Version to 2 in the body and in paymentPayload";

function networkOf(raw: unknown): unknown {
  const req = (raw as Record<string, unknown>)?.["paymentRequirements"] as
    Record<string, unknown> | undefined;
  return req?.["network"];
}

export function registerPaymentRoutes(
  app: FastifyInstance,
  deps: {
    payments: PaymentService;
    metrics: Metrics;
    /** The networks this service serves: the only network labels besides `other`. */
    networks: readonly string[];
  },
): void {
  const config = { auth: "apiKey" as const };
  const labels = new RequestLabels(deps.networks);

  app.post("/verify", { config }, async (request: FastifyRequest, reply: FastifyReply) => {
    const parsed = parsePaymentRequestBody(request.body);
    if (parsed.kind === "invalid") return sendError(reply, "invalid_request", parsed.message);
    if (parsed.kind === "wrong_version") {
      deps.metrics.verifications.inc({
        network: labels.network(networkOf(request.body)),
        result: Reason.invalidX402Version,
      });
      return reply.send(
        verifyRefusal({ reason: Reason.invalidX402Version, message: VERSION_MESSAGE }),
      );
    }
    const extensionResponses: ExtensionResponses = {};
    const result = await deps.payments.verify(
      request.principal!,
      parsed.request,
      extensionResponses,
    );
    setExtensionResponses(reply, extensionResponses);
    deps.metrics.verifications.inc({
      network: labels.network(parsed.request.paymentRequirements.network),
      result: labels.reason(result.isValid ? "valid" : (result.invalidReason ?? "invalid")),
    });
    return reply.send(result);
  });

  app.post("/settle", { config }, async (request: FastifyRequest, reply: FastifyReply) => {
    const parsed = parsePaymentRequestBody(request.body);
    if (parsed.kind === "invalid") return sendError(reply, "invalid_request", parsed.message);
    if (parsed.kind === "wrong_version") {
      const network = networkOf(request.body);
      return reply.send(
        settleRefusal(
          { reason: Reason.invalidX402Version, message: VERSION_MESSAGE },
          typeof network === "string" ? network : "",
        ),
      );
    }
    const extensionResponses: ExtensionResponses = {};
    const result = await deps.payments.settle(
      request.principal!,
      parsed.request,
      extensionResponses,
      request.id,
    );
    setExtensionResponses(reply, extensionResponses);
    deps.metrics.settlements.inc({
      network: labels.network(parsed.request.paymentRequirements.network),
      outcome: labels.reason(result.success ? "succeeded" : (result.errorReason ?? "failed")),
    });
    return reply.send(result);
  });
}
