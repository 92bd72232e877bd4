/**
 * The resource-server side of an end-to-end test: the official
 * `HTTPFacilitatorClient` pointed at the service under test with its API
 * key, and an Express app listening on loopback.
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import type { Express } from "express";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { TestStack } from "./stack.js";

/** Auth headers as the service asks for them: a key on verify and settle, none on supported. */
export function apiKeyAuth(apiKey: string) {
  return async () => ({
    verify: { "X-API-Key": apiKey },
    settle: { "X-API-Key": apiKey },
    supported: {},
  });
}

/** The official facilitator client, pointed at the stack's service. */
export function facilitatorClient(stack: TestStack): HTTPFacilitatorClient {
  return new HTTPFacilitatorClient({ url: stack.url, createAuthHeaders: apiKeyAuth(stack.apiKey) });
}

export interface Listening {
  /** e.g. http://127.0.0.1:12345 */
  origin: string;
  close(): Promise<void>;
}

/** Starts `app` on a free loopback port. */
export async function listenOnLoopback(app: Express): Promise<Listening> {
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
