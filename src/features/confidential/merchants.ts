/**
 * Enablement and offer mode (spec 3.5) and the status a resource server reads
 * before each 402 (spec 2.7, 4.6).
 *
 * Enabling binds the account to a withdrawal wallet for good: the wallet
 * signs a message (an exchange deposit address cannot, which is the point),
 * the row is written once and never changed (a trigger refuses it), and the
 * contract assigns the slot. Repeating the call with the same wallet resumes
 * an assignment that was cut off; another wallet is refused. The merchant's
 * tools may name the slot's viewer (an address of theirs, unlinkable to the
 * wallet) with it: the vault lets that address decrypt the slot's pending
 * credits and balance, so the merchant checks its credit without us.
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
  /** The slot's viewer (may decrypt its pending credits and balance); null: none. */
  viewer: Address | null;
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
      .select(["account_id", "merchant_address", "slot", "viewer_address", "mode", "enabled_at"])
      .where("account_id", "=", accountId)
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      accountId: row.account_id,
      merchant: getAddress(row.merchant_address),
      slot: row.slot === null ? null : BigInt(row.slot),
      viewer: row.viewer_address === null ? null : getAddress(row.viewer_address),
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

  /**
   * `viewerInput`: the slot's viewer, an address whose key the merchant's
   * own tools hold (never its wallet's: the viewer is on-chain and would
   * name the merchant), that may decrypt the slot's pending credits and
   * balance. Recorded with the first enablement and never changed: a
   * repeated call that names another viewer is refused.
   */
  async enable(
    accountId: string,
    merchantInput: string,
    signature: string,
    viewerInput?: string | null,
  ): Promise<MerchantRecord> {
    const vault = this.requireVault();
    const merchant = parseAddress(merchantInput);
    const viewer = viewerInput ? parseAddress(viewerInput) : null;
    if (viewer === merchant) {
      throw new ServiceError(
        "invalid_request",
        "the viewer must not be the withdrawal address: it is public and would name the slot's merchant",
      );
    }
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
    if (existing && viewerInput !== undefined && existing.viewer !== viewer) {
      throw new ServiceError(
        "conflict",
        `the slot's viewer is ${existing.viewer ?? "none"} for good; it cannot be changed`,
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
          viewer_address: viewer?.toLowerCase() ?? null,
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
      .select(["wallet_signature", "viewer_address"])
      .where("account_id", "=", accountId)
      .executeTakeFirstOrThrow();
    const assigned = await vault
      .assignSlot({
        merchant,
        accountRef: accountId,
        walletSignature: recorded.wallet_signature as Hex,
        viewer: recorded.viewer_address === null ? null : getAddress(recorded.viewer_address),
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
