// The dashboard talks to the service only through its JSON API. Every
// state-changing call carries the session's CSRF token. The answers' types
// are the server's own (type-only imports, erased from the bundle), so the
// two cannot drift apart silently.
import type { SettlementPage } from "../../src/features/dashboard/settlementList.js";

/** One settlement of GET /api/settlements. */
export type Settlement = SettlementPage["items"][number];
export type { BillingHistoryEntry } from "../../src/features/billing/billingLedger.js";

let csrfToken = "";

export function setCsrfToken(token: string): void {
  csrfToken = token;
}

/** The session's CSRF token, for calls made outside `api` (the x402 checkout). */
export function currentCsrfToken(): string {
  return csrfToken;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export async function api<T>(
  path: string,
  init: { method?: string; body?: unknown } = {},
): Promise<T> {
  const method = init.method ?? "GET";
  const headers: Record<string, string> = { accept: "application/json" };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET") headers["x-csrf-token"] = csrfToken;
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      credentials: "same-origin",
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    });
  } catch {
    throw new ApiError(0, "network", "The service could not be reached. Check that it is running.");
  }
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (!res.ok)
    throw new ApiError(
      res.status,
      String(body["error"] ?? "error"),
      String(body["message"] ?? `HTTP ${res.status}`),
    );
  return body as T;
}

export interface Session {
  account: { id: string; name: string; plan: string; createdAt: string };
  identity: { email: string | null; name: string | null; provider: string } | null;
  csrfToken: string;
  facilitatorUrl: string;
  mode: "devnet" | "production";
}

export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
}

interface BillingOffer {
  enabled: boolean;
  networks: { network: string; chainId: number; asset: string; symbol: string }[];
  payTo: string | null;
  periodDays: number;
  prices: { starter: string; pro: string; max: string };
  payg: { freeSettlementsPerMonth: number; usdPerSettlement: string; graceUsd: string };
  topUpMinUsd: string;
  devnetPayers?: { address: string; privateKey: string }[];
}

export interface PlanStatus {
  plan: string;
  suspended: boolean;
  suspendedReason?: string;
  suspendedBy: string | null;
  month: string;
  limit: number;
  usedThisMonth: number;
  metered: boolean;
  paidUntil: string | null;
  nextPlan: string | null;
  nextPlanChosen: boolean;
  nextPlanPaid: boolean;
  balanceUsd: string;
  balanceMicroUsd: string;
  plans: {
    plan: string;
    monthlySettlements: number;
    usdPerExtraSettlement?: number;
    usdPerPeriod?: string;
  }[];
  billing: BillingOffer;
}
