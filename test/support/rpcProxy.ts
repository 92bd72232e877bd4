/**
 * A loopback JSON-RPC proxy in front of a local chain, to play a provider's
 * failures: `down` answers 502 to everything (an outage); `drops` loses the
 * answer to the next calls whose body contains `dropMatching` after the
 * chain has executed them (a broadcast whose answer never arrives), cut
 * either at once or, with `dropWhenMined`, once the chain has mined the
 * transactions the call sent (so the sender's retry finds them mined).
 * `answers` keeps the chain's answers to the matching calls, lost or not.
 * `hold()` keeps every call waiting (a provider that stalls) until `release()`;
 * `hold(matching)` only the calls whose body contains `matching` (the
 * calls that carry one payment), while every other call goes through.
 * `refuseMatching` answers a JSON-RPC error, without asking the chain, to
 * every call whose body contains it (a provider that refuses a method, as
 * many refuse `eth_getLogs` over a long block range); `refused` keeps the
 * bodies of the calls it refused.
 */
import { createServer, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createPublicClient, http, keccak256, type Hex } from "viem";
import { until } from "./processes.js";

export interface RpcProxy {
  url: string;
  state: {
    down: boolean;
    drops: number;
    dropped: number;
    dropMatching: string;
    /** Hold a dropped answer until the transactions the call sent are mined. */
    dropWhenMined: boolean;
    answers: string[];
    refuseMatching: string;
    refused: string[];
  };
  /** From now on, calls (those containing `matching`, if given) wait here instead of reaching the chain. */
  hold(matching?: string): void;
  /** How many calls are waiting. */
  readonly waiting: number;
  /** Sends the held calls on, and the ones after them straight through. */
  release(): void;
  close(): Promise<void>;
}

export async function startRpcProxy(target: string, dropMatching = ""): Promise<RpcProxy> {
  const state = {
    down: false,
    drops: 0,
    dropped: 0,
    dropMatching,
    dropWhenMined: false,
    answers: [] as string[],
    refuseMatching: "",
    refused: [] as string[],
  };
  let held: (() => void)[] | undefined;
  let holdMatching = "";
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (held && body.includes(holdMatching)) held.push(() => forward(res, body));
      else forward(res, body);
    });
  });
  const forward = (res: ServerResponse, body: Buffer) => {
    if (state.down) {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end("bad gateway");
      return;
    }
    if (state.refuseMatching !== "" && body.includes(state.refuseMatching)) {
      state.refused.push(body.toString("utf8"));
      const call = JSON.parse(body.toString("utf8")) as { id?: unknown };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          jsonrpc: "2.0",
          id: call.id ?? null,
          error: { code: -32005, message: "query exceeds the provider's block range limit" },
        }),
      );
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
          if (matches) state.answers.push(Buffer.concat(out).toString("utf8"));
          if (matches && state.drops > 0) {
            state.drops--;
            state.dropped++;
            const cut = () => res.socket?.destroy();
            if (state.dropWhenMined) void minedOn(target, body).then(cut, cut);
            else cut();
            return;
          }
          res.writeHead(up.statusCode ?? 200, { "content-type": "application/json" });
          res.end(Buffer.concat(out));
        });
      },
    );
    upstream.end(body);
  };
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    state,
    hold: (matching = "") => {
      held ??= [];
      holdMatching = matching;
    },
    get waiting() {
      return held?.length ?? 0;
    },
    release: () => {
      const waiting = held ?? [];
      held = undefined;
      holdMatching = "";
      for (const send of waiting) send();
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Resolves once every raw transaction a JSON-RPC body sent has a receipt on `target`. */
async function minedOn(target: string, body: Buffer): Promise<void> {
  const parsed = JSON.parse(body.toString("utf8")) as RpcCall | RpcCall[];
  const hashes = (Array.isArray(parsed) ? parsed : [parsed])
    .filter((c) => c.method === "eth_sendRawTransaction")
    .map((c) => keccak256(c.params[0] as Hex));
  const chain = createPublicClient({ transport: http(target) });
  for (const hash of hashes) {
    // Not mined yet is an error ("receipt not found"), which `until` retries.
    await until(`transaction ${hash} to be mined`, () => chain.getTransactionReceipt({ hash }));
  }
}

interface RpcCall {
  method: string;
  params: unknown[];
}
