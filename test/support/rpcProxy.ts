/**
 * A loopback JSON-RPC proxy in front of a local chain, to play a provider's
 * failures: `down` answers 502 to everything (an outage); `drops` loses the
 * answer to the next calls whose body contains `dropMatching` after the
 * chain has executed them (a broadcast whose answer never arrives), after
 * `dropAfterMs` (so the transaction can be mined before the sender retries).
 */
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface RpcProxy {
  url: string;
  state: {
    down: boolean;
    drops: number;
    dropped: number;
    dropMatching: string;
    /** How long a dropped answer is held before the connection is cut (lets a block pass). */
    dropAfterMs: number;
  };
  close(): Promise<void>;
}

export async function startRpcProxy(target: string, dropMatching = ""): Promise<RpcProxy> {
  const state = { down: false, drops: 0, dropped: 0, dropMatching, dropAfterMs: 0 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (state.down) {
        res.writeHead(502, { "content-type": "text/plain" });
        res.end("bad gateway");
        return;
      }
      const matches = state.dropMatching !== "" && body.includes(state.dropMatching);
      const upstream = request(
        target,
        { method: "POST", headers: { "content-type": "application/json" } },
        (up) => {
          const out: Buffer[] = [];
          up.on("data", (c: Buffer) => out.push(c));
          up.on("end", () => {
            if (matches && state.drops > 0) {
              state.drops--;
              state.dropped++;
              setTimeout(() => res.socket?.destroy(), state.dropAfterMs);
              return;
            }
            res.writeHead(up.statusCode ?? 200, { "content-type": "application/json" });
            res.end(Buffer.concat(out));
          });
        },
      );
      upstream.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
