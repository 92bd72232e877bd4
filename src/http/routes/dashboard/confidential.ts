/**
 * The Confidential tab (spec 3.4, 3.5, 4.7):
 *
 *   GET  /api/confidential                       status, fee, merchant, what it is
 *   GET  /api/confidential/enablement-message    what the wallet signs to enable
 *   POST /api/confidential/enable                bind the withdrawal wallet, assign the slot
 *   POST /api/confidential/mode                  default | confidential | both, live
 *   GET  /api/confidential/balance               available (decrypted) and pending
 *   GET  /api/confidential/receipts              confidential payments and their receipts (paged)
 *   GET  /api/confidential/days                  each challengeable day: its credit against its receipts
 *   POST /api/confidential/withdrawals/request   what the wallet signs to withdraw
 *   POST /api/confidential/withdrawals           submit a signed withdrawal
 *   GET  /api/confidential/withdrawals           the account's withdrawals
 *   POST /api/confidential/withdrawals/:id/cancel  what the wallet needs to cancel one
 *
 * No answer here carries calldata: the tab builds every transaction the
 * wallet sends (challenge, redeem, cancel) itself, from receipts and ids.
 *
 * Errors are ServiceErrors thrown by the feature and shaped by the server's
 * error handler like every other route.
 */
import type { FastifyInstance } from "fastify";
import type { TypedDataDefinition } from "viem";
import type { ConfidentialFeature } from "../../../features/confidential/createConfidential.js";
import { ServiceError } from "../../../lib/errors.js";
import { sessionRoute } from "./schemas.js";

const DESCRIPTION =
  "Confidential settlement credits your payments into an encrypted balance held by a privacy contract on Base: the chain does not show which payments are yours, your daily sums or your balance, except what a challenge or a redemption reveals (below). Payers pay the contract with an ordinary USDC authorization, and the contract binds each payment to your encrypted slot when it collects it (your receipt opens that binding); your payments become available in one batch each day after 00:00 UTC, once a challenge window has passed, and you withdraw to a wallet you hold the keys of. That wallet is bound to your account for good.";

/** Exactly who learns what, in the tab's words (docs/confidential.md). */
const OBSERVER =
  "What anyone reading the chain sees: every payment's payer, amount and time (payers pay the contract, not you), each day's total over all merchants, your viewer address if you named one, and each of your withdrawals: its amount, your slot and withdrawal address, and whether your balance covered it (it says nothing about the balance itself). A price only you charge can identify your payments, and while few merchants use the contract a day's total is close to their revenue. A challenge or a redemption shows your slot, its payments and the account that sends it (sent from your withdrawal wallet, it links that address to your slot: let a watcher's account send it instead); a challenge also shows your credit for that day (exactly when it proves a shortfall, a lower bound when not) and what the bond then pays you. Anyone who fetches your 402 sees your withdrawal address, and each payer learns your slot from its receipt. Any API key of this account sees your withdrawal address, your credit for each day still open to challenge, what the bond paid you, and the receipt of each payment it settles; not your balance. Whoever holds your viewer key decrypts your daily credits and balance. We, the operator, see everything.";

/** Which keys are still trusted, and for what, in the tab's words (docs/confidential.md). */
const TRUST =
  "Still trusted: our operator key commits each payment to a slot as it is collected (check each receipt: a payment committed elsewhere does not open to your slot), and writes each day's split. A split that shorts you stands unless your receipts prove it within the challenge window (you, a watcher of yours or our batch can send them); then the operator's bond pays the shortfall, and a bounty while it has bond to spare. The bond owner's key can withdraw spare bond, which can stop days from closing, and answers a proven shortfall (after 14 days without it, anyone may end the freeze); it cannot move your money. Zama's key management network could decrypt anything its members collude on, and every payout, close and challenge verdict rests on its signatures: forged ones could pay out or withhold merchants' money, or show a wrong credit, but never pay out more in total than the contract ever credited: at most merchants' balances, the bond's share of days not yet released, and bounties. We serve this page's code; npm run confidential:check is your own check.";

/** A challenge window in words: "2 days", "6 hours", "90 seconds". */
function duration(seconds: bigint): string {
  const [n, unit] =
    seconds % 86_400n === 0n
      ? [seconds / 86_400n, "day"]
      : seconds % 3_600n === 0n
        ? [seconds / 3_600n, "hour"]
        : [seconds, "second"];
  return `${n} ${unit}${n === 1n ? "" : "s"}`;
}

/** USDC base units (6 decimals) in words: 100000 → "0.1 USDC". */
function usdcAmount(atomic: bigint): string {
  const cents = (atomic % 1_000_000n).toString().padStart(6, "0").replace(/0+$/, "");
  return `${atomic / 1_000_000n}${cents ? `.${cents}` : ""} USDC`;
}

/** What the devnet's vault lacks, from its own settings (none of the production floors apply). */
function devnetNote(vault: ConfidentialFeature["vault"]): string {
  const window =
    !vault || vault.challengeWindow === 0n
      ? "no challenge window (a closed day's credits are released at once)"
      : `a challenge window of ${duration(vault.challengeWindow)}`;
  const { base, perOpening } = vault?.challengeBounty ?? { base: 0n, perOpening: 0n };
  const bounty =
    base === 0n && perOpening === 0n
      ? "no challenge bounty"
      : `a challenge bounty of ${usdcAmount(base)} per proof and ${usdcAmount(perOpening)} per receipt`;
  return `On this development network (devnet) nothing is private or protected: its key management network is a mock with public keys, so anyone can forge its decryptions. Its contract has ${window} and ${bounty}.`;
}

const address = { type: "string", pattern: "^0x[0-9a-fA-F]{40}$" } as const;

export function registerConfidentialRoutes(
  app: FastifyInstance,
  deps: { confidential: ConfidentialFeature; mode: "devnet" | "production" },
): void {
  const { merchants } = deps.confidential;
  // The routes that need the vault answer 404 on a service without one.
  const need = <T>(part: T | undefined): T => {
    if (!part) {
      throw new ServiceError(
        "not_found",
        "confidential settlement is not available on this service",
      );
    }
    return part;
  };
  const withdrawals = () => need(deps.confidential.withdrawals);
  const credits = () => need(deps.confidential.credits);

  app.get(
    "/api/confidential",
    sessionRoute("confidential", {
      summary: "Confidential settlement: status, fee and offer mode",
    }),
    async (request) => {
      const accountId = request.dashboardSession!.accountId;
      const [status, merchant] = await Promise.all([
        merchants.status(accountId),
        merchants.find(accountId),
      ]);
      return {
        ...status,
        slot: merchant?.slot?.toString() ?? null,
        viewer: merchant?.viewer ?? null,
        enabledAt: merchant?.enabledAt?.toISOString() ?? null,
        asset: deps.confidential.vault?.asset ?? null,
        fee: {
          unitsPerSettlement: deps.confidential.units,
          explanation:
            deps.confidential.units === 1
              ? "A confidential settlement counts as one settlement against your plan, like any other. Payers pay exactly the advertised price."
              : `A confidential settlement counts as ${deps.confidential.units} settlements against your plan (the encrypted daily credit costs gas). Payers pay exactly the advertised price.`,
        },
        description: DESCRIPTION,
        observer: OBSERVER,
        trust: TRUST,
        devnet: deps.mode === "devnet" ? devnetNote(deps.confidential.vault) : null,
      };
    },
  );

  app.get(
    "/api/confidential/enablement-message",
    sessionRoute("confidential", {
      summary: "The message the withdrawal wallet signs to enable confidential settlement",
      querystring: { type: "object", required: ["address"], properties: { address } },
    }),
    async (request) => {
      const { address: merchant } = request.query as { address: string };
      return {
        message: merchants.enablementMessage(merchant, request.dashboardSession!.accountId),
      };
    },
  );

  app.post(
    "/api/confidential/enable",
    sessionRoute("confidential", {
      summary: "Bind the withdrawal wallet (permanently) and assign the encrypted slot",
      body: {
        type: "object",
        required: ["address", "signature"],
        additionalProperties: false,
        properties: {
          address,
          signature: { type: "string", pattern: "^0x[0-9a-fA-F]+$" },
          // The slot's viewer: an address of the merchant's own tools (not
          // the wallet) that may decrypt the slot's pending credits and balance.
          viewer: address,
        },
      },
    }),
    async (request) => {
      const {
        address: merchant,
        signature,
        viewer,
      } = request.body as {
        address: string;
        signature: string;
        viewer?: string;
      };
      const m = await merchants.enable(
        request.dashboardSession!.accountId,
        merchant,
        signature,
        viewer,
      );
      return {
        merchantAddress: m.merchant,
        slot: m.slot?.toString() ?? null,
        viewer: m.viewer,
        mode: m.mode,
      };
    },
  );

  app.post(
    "/api/confidential/mode",
    sessionRoute("confidential", {
      summary: "Choose the offer mode; the next 402 uses it",
      body: {
        type: "object",
        required: ["mode"],
        additionalProperties: false,
        properties: { mode: { type: "string", enum: ["default", "confidential", "both"] } },
      },
    }),
    async (request) => {
      const { mode } = request.body as { mode: string };
      const m = await merchants.setMode(request.dashboardSession!.accountId, mode);
      return { mode: m.mode };
    },
  );

  app.get(
    "/api/confidential/balance",
    sessionRoute("confidential", {
      summary:
        "Available balance (decrypted with the operator's permission, penalties the bond paid included) and pending payments",
    }),
    async (request) => {
      const accountId = request.dashboardSession!.accountId;
      const merchant = await merchants.find(accountId);
      if (!merchant || merchant.slot === null) {
        throw new ServiceError("conflict", "enable confidential settlement first");
      }
      const vault = need(deps.confidential.vault);
      const [available, pending] = await Promise.all([
        vault.balance(merchant.slot).then(
          (v) => ({ value: v.toString(), error: null }),
          () => ({
            value: null,
            error: "the balance could not be decrypted just now; retry shortly",
          }),
        ),
        credits().pendingTotal(accountId),
      ]);
      return {
        available: available.value,
        availableError: available.error,
        pending: pending.toString(),
      };
    },
  );

  app.get(
    "/api/confidential/receipts",
    sessionRoute("confidential", {
      summary: "Confidential payments with their receipts (commitment openings), newest first",
      querystring: {
        type: "object",
        properties: {
          before: { type: "string", format: "date-time" },
          limit: { type: "integer", minimum: 1, maximum: 500 },
        },
      },
    }),
    async (request) => {
      const { before, limit } = request.query as { before?: string; limit?: number };
      return {
        receipts: await credits().list(request.dashboardSession!.accountId, {
          ...(before ? { before: new Date(before) } : {}),
          ...(limit ? { limit } : {}),
        }),
      };
    },
  );

  app.get(
    "/api/confidential/days",
    sessionRoute("confidential", {
      summary:
        "Each day still in its challenge window: the slot's credit against the day's receipts, and on a shortfall the receipts not yet presented",
    }),
    async (request) => ({ days: await credits().dayChecks(request.dashboardSession!.accountId) }),
  );

  app.post(
    "/api/confidential/withdrawals/request",
    sessionRoute("confidential", {
      summary: "The EIP-712 request the withdrawal wallet signs",
      body: {
        type: "object",
        required: ["amount"],
        additionalProperties: false,
        properties: { amount: { type: "string", pattern: "^[1-9][0-9]{0,30}$" } },
      },
    }),
    async (request) => {
      const { amount } = request.body as { amount: string };
      return {
        typedData: await withdrawals().typedData(request.dashboardSession!.accountId, amount),
      };
    },
  );

  app.post(
    "/api/confidential/withdrawals",
    sessionRoute("confidential", {
      summary: "Submit a signed withdrawal; we pay the gas of the request and the finalization",
      body: {
        type: "object",
        required: ["typedData", "signature"],
        additionalProperties: false,
        properties: {
          typedData: { type: "object" },
          signature: { type: "string", pattern: "^0x[0-9a-fA-F]+$" },
        },
      },
    }),
    async (request) => {
      const { typedData, signature } = request.body as {
        typedData: TypedDataDefinition;
        signature: string;
      };
      return withdrawals().submit(request.dashboardSession!.accountId, typedData, signature);
    },
  );

  app.get(
    "/api/confidential/withdrawals",
    sessionRoute("confidential", { summary: "The account's withdrawals" }),
    async (request) => ({
      withdrawals: await withdrawals().list(request.dashboardSession!.accountId),
    }),
  );

  app.post(
    "/api/confidential/withdrawals/:id/cancel",
    sessionRoute("confidential", {
      summary:
        "What the withdrawal wallet needs to cancel a withdrawal stalled 24 hours (the vault and the withdrawal's id there)",
      params: {
        type: "object",
        required: ["id"],
        properties: { id: { type: "string", format: "uuid" } },
      },
    }),
    async (request) => {
      const { id } = request.params as { id: string };
      return withdrawals().cancellation(request.dashboardSession!.accountId, id);
    },
  );
}
