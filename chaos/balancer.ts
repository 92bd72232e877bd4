/**
 * A small round-robin HTTP load balancer in front of the service processes,
 * as an operator runs them. A replica that refuses the connection (down,
 * restarting) is skipped: the request never reached it, so sending it to the
 * next one is safe. A replica that dies with the request inside it cannot be
 * retried by the balancer (it may have acted on it): the client gets a 502
 * marked `x-chaos-balancer`, which the checks count as a lost connection,
 * not as the service's answer. Each answer names the replica that gave it.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Backend {
  readonly name: string;
  /** Undefined while the replica is not serving. */
  url: string | undefined;
}

export interface Balancer {
  url: string;
  close(): Promise<void>;
}

export async function startBalancer(backends: readonly Backend[]): Promise<Balancer> {
  let next = 0;
  const send = (req: IncomingMessage, body: Buffer, res: ServerResponse, tried: number): void => {
    const live = backends.filter((b) => b.url !== undefined);
    if (tried >= backends.length || live.length === 0) {
      res.writeHead(503, {
        "content-type": "application/json",
        "retry-after": "1",
        "x-chaos-balancer": "no-backend",
      });
      res.end(JSON.stringify({ error: "no_backend", message: "no replica is serving" }));
      return;
    }
    const backend = live[next++ % live.length]!;
    const headers = { ...req.headers, "x-forwarded-for": req.socket.remoteAddress ?? "" };
    delete headers["host"];
    const upstream = request(
      `${backend.url}${req.url ?? "/"}`,
      { method: req.method ?? "GET", headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, {
          ...up.headers,
          "x-chaos-replica": backend.name,
        });
        up.pipe(res);
        up.on("error", () => res.socket?.destroy());
      },
    );
    upstream.on("error", (e: NodeJS.ErrnoException) => {
      if (res.headersSent) return void res.socket?.destroy();
      if (e.code === "ECONNREFUSED") return send(req, body, res, tried + 1);
      res.writeHead(502, {
        "content-type": "application/json",
        "x-chaos-balancer": "upstream-lost",
        "x-chaos-replica": backend.name,
      });
      res.end(JSON.stringify({ error: "upstream_lost", message: e.message }));
    });
    upstream.end(body);
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => send(req, Buffer.concat(chunks), res, 0));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
