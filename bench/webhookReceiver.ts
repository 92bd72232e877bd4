/**
 * A webhook endpoint for the benchmark account: a loopback HTTP server that
 * answers every delivery 200 at once. With an endpoint registered the
 * service writes an outbox event for every settlement outcome and its worker
 * delivers them, as it does for a customer who uses webhooks, so that work
 * is part of what is measured. It counts what arrives.
 */
import { createServer } from "node:http";

export interface WebhookReceiver {
  url: string;
  /** Deliveries received so far. */
  received(): number;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  let received = 0;
  const server = createServer((req, res) => {
    // Read the body to its end, as a receiver verifying the signature would.
    req.resume();
    req.on("end", () => {
      received++;
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/webhooks`,
    received: () => received,
    close: () =>
      new Promise<void>((resolve) => {
        // The sender's keep-alive connections would hold close() open.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
