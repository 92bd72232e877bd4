/**
 * The EXTENSION-RESPONSES header of /verify and /settle: extension outcomes
 * (such as bazaar cataloging) as base64-encoded JSON keyed by extension, the
 * way the x402 HTTP transport encodes its headers and `HTTPFacilitatorClient`
 * decodes them. Absent when no extension has anything to report.
 */
import type { FastifyReply } from "fastify";
import type { ExtensionResponses } from "../features/payments/paymentService.js";

const EXTENSION_RESPONSES_HEADER = "EXTENSION-RESPONSES";

function encodeExtensionResponses(responses: ExtensionResponses): string {
  return Buffer.from(JSON.stringify(responses), "utf8").toString("base64");
}

export function setExtensionResponses(reply: FastifyReply, responses: ExtensionResponses): void {
  if (Object.keys(responses).length === 0) return;
  reply.header(EXTENSION_RESPONSES_HEADER, encodeExtensionResponses(responses));
}
