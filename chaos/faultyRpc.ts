/**
 * One loopback proxy in front of each chain's RPC, playing the ways a
 * provider fails: it delays answers, answers errors (HTTP 502 or a JSON-RPC
 * error), blackholes calls (never answers: the caller's own timeout must
 * save it), or drops the answer after the chain has executed the call (a
 * broadcast whose answer is lost). The fault schedule sets `mode`; every
 * call passes straight through in `pass`.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type RpcFaultMode = "pass" | "delay" | "error" | "blackhole" | "drop";

export interface FaultyRpc {
  /** Which chain it fronts, for the report. */
  readonly chain: string;
  readonly url: string;
  mode: RpcFaultMode;
  /** How many calls each fault touched. */
  readonly touched: Record<RpcFaultMode, number>;
  close(): Promise<void>;
}

const DELAY_MS = 1_500;
/** A blackholed call is cut after this long, so the run's sockets do not pile up. */
const BLACKHOLE_MS = 30_000;

export async function startFaultyRpc(chain: string, target: string): Promise<FaultyRpc> {
  const touched: Record<RpcFaultMode, number> = {
    pass: 0,
    delay: 0,
    error: 0,
    blackhole: 0,
    drop: 0,
  };
  const proxy: { mode: RpcFaultMode } = { mode: "pass" };
  const forward = (req: IncomingMessage, body: Buffer, res: ServerResponse, lose: boolean) => {
    const upstream = request(
      target,
      { method: req.method ?? "POST", headers: { "content-type": "application/json" } },
      (up) => {
        const out: Buffer[] = [];
        up.on("data", (c: Buffer) => out.push(c));
        up.on("end", () => {
          if (lose) {
            res.socket?.destroy();
            return;
          }
          res.writeHead(up.statusCode ?? 200, { "content-type": "application/json" });
          res.end(Buffer.concat(out));
        });
      },
    );
    upstream.on("error", () => res.socket?.destroy());
    upstream.end(body);
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const mode = proxy.mode;
      touched[mode]++;
      switch (mode) {
        case "pass":
          return forward(req, body, res, false);
        case "delay":
          return void setTimeout(() => forward(req, body, res, false), DELAY_MS);
        case "drop":
          return forward(req, body, res, true);
        case "blackhole":
          return void setTimeout(() => res.socket?.destroy(), BLACKHOLE_MS).unref();
        case "error":
          // Half the errors are the gateway's, half the node's own JSON-RPC error.
          if (touched.error % 2 === 0) {
            res.writeHead(502, { "content-type": "text/plain" });
            return void res.end("bad gateway");
          }
          res.writeHead(200, { "content-type": "application/json" });
          return void res.end(
            JSON.stringify({
              jsonrpc: "2.0",
              id: idOf(body),
              error: { code: -32603, message: "internal error (chaos)" },
            }),
          );
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    chain,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get mode() {
      return proxy.mode;
    },
    set mode(m: RpcFaultMode) {
      proxy.mode = m;
    },
    touched,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function idOf(body: Buffer): unknown {
  try {
    const call = JSON.parse(body.toString("utf8")) as { id?: unknown };
    return call.id ?? null;
  } catch {
    return null;
  }
}
