/**
 * The merchants' webhook endpoint during a chaos run: it verifies each
 * delivery's signature with `standardwebhooks` (as a receiver should), keeps
 * every event it accepted, and now and then answers 500 so deliveries are
 * retried and repeat, as a receiver that is itself flaky makes them.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

interface ReceivedEvent {
  id: string;
  type: string;
  settlementId: string | undefined;
}

export interface WebhookReceiver {
  url: string;
  /** Accepted deliveries, repeats included. */
  received: ReceivedEvent[];
  /** Deliveries whose signature did not verify (must stay 0). */
  badSignatures: number;
  /** While true, one first delivery in fifty fails (set false once traffic stops). */
  flaky: boolean;
  /** Signing secrets by the path each account's endpoint uses. */
  secrets: Map<string, string>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(random: () => number): Promise<WebhookReceiver> {
  const receiver: WebhookReceiver = {
    url: "",
    received: [],
    badSignatures: 0,
    flaky: true,
    secrets: new Map(),
    close: async () => undefined,
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const secret = receiver.secrets.get(req.url ?? "");
      let event: { type: string; data?: { id?: string } };
      try {
        if (!secret) throw new Error("no endpoint at this path");
        event = new Webhook(secret).verify(body, {
          "webhook-id": String(req.headers["webhook-id"]),
          "webhook-timestamp": String(req.headers["webhook-timestamp"]),
          "webhook-signature": String(req.headers["webhook-signature"]),
        }) as typeof event;
      } catch {
        receiver.badSignatures++;
        res.writeHead(400).end();
        return;
      }
      // A flaky receiver: one first delivery in fifty fails after the event
      // was seen, so that event is delivered again (about 30 s later). The
      // service delivers an account's events in order, so each failure holds
      // that account's later events back until its retry.
      const first = !receiver.received.some((e) => e.id === String(req.headers["webhook-id"]));
      receiver.received.push({
        id: String(req.headers["webhook-id"]),
        type: event.type,
        settlementId: event.data?.id,
      });
      res.writeHead(receiver.flaky && first && random() < 0.02 ? 500 : 204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return receiver;
}
