/**
 * Enablement and offer mode (spec 3.5) and the status a resource server reads
 * before each 402 (spec 2.7, 4.6).
 *
 * Enabling binds the account to a withdrawal wallet for good: the wallet
 * signs a message (an exchange deposit address cannot, which is the point),
 * the row is written once and never changed (a trigger refuses it), and the
 * contract assigns the slot. Repeating the call with the same wallet resumes
 * an assignment that was cut off; another wallet is refused.
 */
import {
  getAddress,
  isAddress,
  verifyMessage,
  type Address,
  type Hex,
} from "../../chains/confidentialPort.js";
import type { Kysely } from "kysely";
import { ServiceError } from "../../lib/errors.js";
import type { Database, OfferMode } from "../../storage/schema.js";
import type { ConfidentialVault } from "./vaultPort.js";
import { CONFIDENTIAL_NETWORK } from "../../chains/confidentialPort.js";
import type { ConfidentialStatus } from "../../clients/confidential/offers.js";

const OFFER_MODES: readonly OfferMode[] = ["default", "confidential", "both"];

/** The answer of `GET /confidential/status`, in the shape the resource-server helper reads. */
export type { ConfidentialStatus };

export interface MerchantRecord {
  accountId: string;
  merchant: Address;
  slot: bigint | null;
  mode: OfferMode;
  enabledAt: Date | null;
}

export class ConfidentialMerchants {
  constructor(
    private readonly db: Kysely<Database>,
    /** Absent when this deployment has no privacy contract configured. */
    private readonly vault: ConfidentialVault | undefined,
  ) {}

  get available(): boolean {
    return this.vault !== undefined;
  }

  async find(accountId: string): Promise<MerchantRecord | undefined> {
    const row = await this.db
      .selectFrom("confidential_merchants")
      .select(["account_id", "merchant_address", "slot", "mode", "enabled_at"])
      .where("account_id", "=", accountId)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      accountId: row.account_id,
      merchant: getAddress(row.merchant_address),
      slot: row.slot === null ? null : BigInt(row.slot),
      mode: row.mode,
      enabledAt: row.enabled_at,
    };
  }

  async status(accountId: string): Promise<ConfidentialStatus> {
    const m = this.vault ? await this.find(accountId) : undefined;
    const enabled = m?.slot !== null && m?.slot !== undefined;
    return {
      available: this.available,
      network: this.vault?.network ?? CONFIDENTIAL_NETWORK,
      contractAddress: this.vault?.address ?? "",
      configured: m !== undefined,
      // Until a slot exists only the plain offer can be paid.
      mode: enabled ? m!.mode : "default",
      enabled,
      merchantAddress: m?.merchant ?? "",
    };
  }

  /** The message the wallet signs; the account id ties it to this account. */
  enablementMessage(merchant: string, accountId: string): string {
    return this.requireVault().enablementMessage(parseAddress(merchant), accountId);
  }

  async enable(
    accountId: string,
    merchantInput: string,
    signature: string,
  ): Promise<MerchantRecord> {
    const vault = this.requireVault();
    const merchant = parseAddress(merchantInput);
    if (!/^0x[0-9a-fA-F]+$/.test(signature)) {
      throw new ServiceError("invalid_request", "signature must be a 0x-prefixed hex string");
    }
    const message = vault.enablementMessage(merchant, accountId);
    const signed = await verifyMessage({
      address: merchant,
      message,
      signature: signature as Hex,
    }).catch(() => false);
    if (!signed) {
      throw new ServiceError(
        "invalid_request",
        "the signature is not this wallet's signature of the enablement message; sign it with the wallet whose keys you hold",
      );
    }
    const existing = await this.find(accountId);
    if (existing && existing.merchant !== merchant) {
      throw new ServiceError(
        "conflict",
        `confidential settlement is bound to ${existing.merchant} for good; the withdrawal address cannot be changed`,
      );
    }
    if (!existing) {
      const inserted = await this.db
        .insertInto("confidential_merchants")
        .values({
          account_id: accountId,
          merchant_address: merchant.toLowerCase(),
          enablement_message: message,
          wallet_signature: signature,
        })
        .onConflict((oc) => oc.doNothing())
        .returning("account_id")
        .executeTakeFirst();
      if (!inserted) {
        const now = await this.find(accountId);
        if (!now || now.merchant !== merchant) {
          throw new ServiceError(
            "conflict",
            "this wallet is already the withdrawal address of another account",
          );
        }
      }
    }
    const current = (await this.find(accountId))!;
    if (current.slot !== null) return current;
    // The slot is derived from the first signature recorded, never from the
    // one just posted: a wallet that signs the same message differently
    // (not every signer is deterministic) would otherwise get a second slot
    // when it resumes an assignment whose answer was lost.
    const recorded = await this.db
      .selectFrom("confidential_merchants")
      .select("wallet_signature")
      .where("account_id", "=", accountId)
      .executeTakeFirstOrThrow();
    const assigned = await vault
      .assignSlot({
        merchant,
        accountRef: accountId,
        walletSignature: recorded.wallet_signature as Hex,
      })
      .catch((e: unknown) => {
        // The wallet is recorded; enabling again with it resumes here.
        throw new ServiceError(
          "service_unavailable",
          "the slot could not be assigned on-chain just now; enable again with the same wallet to finish",
          { retryable: true, cause: e },
        );
      });
    await this.db
      .updateTable("confidential_merchants")
      .set({
        slot: assigned.slot.toString(),
        slot_secret: assigned.secret,
        slot_tx_hash: assigned.txHash,
        enabled_at: new Date(),
      })
      .where("account_id", "=", accountId)
      .where("slot", "is", null)
      .execute();
    return (await this.find(accountId))!;
  }

  async setMode(accountId: string, mode: string): Promise<MerchantRecord> {
    if (!(OFFER_MODES as readonly string[]).includes(mode)) {
      throw new ServiceError("invalid_request", `mode must be one of ${OFFER_MODES.join(", ")}`);
    }
    const m = await this.find(accountId);
    if (!m || m.slot === null) {
      throw new ServiceError(
        "conflict",
        "enable confidential settlement (connect a withdrawal wallet) before choosing an offer mode",
      );
    }
    await this.db
      .updateTable("confidential_merchants")
      .set({ mode: mode as OfferMode })
      .where("account_id", "=", accountId)
      .execute();
    return { ...m, mode: mode as OfferMode };
  }

  private requireVault(): ConfidentialVault {
    if (!this.vault) {
      throw new ServiceError(
        "not_found",
        "confidential settlement is not available on this service (no privacy contract is configured)",
      );
    }
    return this.vault;
  }
}

function parseAddress(v: string): Address {
  if (typeof v !== "string" || !isAddress(v, { strict: false })) {
    throw new ServiceError("invalid_request", "address must be a 0x-prefixed 20-byte hex address");
  }
  return getAddress(v);
}
