/**
 * A TCP relay in front of a server (PostgreSQL in tests) that can stall:
 * `stall()` stops passing bytes both ways on every connection, as a network
 * or a database that stops answering does, until `resume()`. Connections
 * stay open meanwhile, so the client sees silence, not an error.
 */
import { createServer, connect, type Socket } from "node:net";

export interface TcpProxy {
  /** host:port clients connect to instead of the target. */
  readonly port: number;
  stall(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let stalled = false;
  const pipes: { from: Socket; to: Socket }[] = [];
  const server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => s.destroy());
      s.on("close", () => sockets.delete(s));
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      pipes.push({ from, to });
      from.on("data", (chunk) => to.write(chunk));
      if (stalled) from.pause();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("the proxy has no port");
  return {
    port: address.port,
    stall() {
      stalled = true;
      for (const p of pipes) p.from.pause();
    },
    resume() {
      stalled = false;
      for (const p of pipes) p.from.resume();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
