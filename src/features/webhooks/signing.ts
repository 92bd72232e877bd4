/**
 * Standard Webhooks signing (HMAC-SHA256 over `id.timestamp.body`), done by
 * the `standardwebhooks` package. Secrets are `whsec_` + base64 of 32 random
 * bytes, the format that package and other Standard Webhooks receivers read.
 */
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";

export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

export interface SignedHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

export function signWebhook(
  secret: string,
  eventId: string,
  body: string,
  at = new Date(),
): SignedHeaders {
  const signature = new Webhook(secret).sign(eventId, at, body);
  return {
    "webhook-id": eventId,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": signature,
  };
}
