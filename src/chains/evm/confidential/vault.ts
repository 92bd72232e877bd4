/**
 * The service's side of the confidential settlement vault
 * (`devnet/evm/contracts/ConfidentialSettlementVault.sol`) on `eip155:8453`.
 *
 * How confidential settlement runs, and what this module does in it:
 *   1. Enablement: the merchant's wallet signs `enablementMessage`;
 *      `assignSlot` checks the signature, derives the slot's secret salt from
 *      it and binds a slot to `commitment(merchant, salt)` on-chain, with the
 *      viewer address the merchant's tools chose (it may decrypt the slot's
 *      pending credits and balance). Store the returned `slot` and `secret`:
 *      `submitWithdraw` needs the secret.
 *   2. Settling: `attribute` commits the payment to its merchant's slot
 *      (keccak256(key, slot, blinding), the blinding derived from the slot's
 *      salt) and signs that attribution with the operator key; the payer
 *      signs its ordinary USDC authorization to the vault (`payTo` =
 *      `address`), and the EVM family submits it, with the attribution, to
 *      the vault's `collect` instead of the token (collectingSigner.ts). The
 *      vault records payer, nonce, amount, day and the commitment, never the
 *      merchant. `receiptOf` gives the merchant's receipt: the opening,
 *      checked against what the vault stored (returned in the settle response).
 *   3. The daily batch: `creditDay` (for any ended, unclosed day) returns
 *      unattributed payments to their payers, writes an encrypted credit for
 *      every slot (zero for a merchant who earned nothing) into its pending
 *      bucket, closes the day, finalizes it with the KMS proof that the
 *      credits add up to the day's pool, and releases them into the
 *      balances. Safe to call again after a crash at any point: the contract
 *      refuses a second credit per slot, day and attempt, and a second release.
 *   4. Withdrawal: `prepareWithdraw` gives the EIP-712 request the merchant's
 *      wallet signs; `submitWithdraw` debits obliviously (the amount, or
 *      nothing when the balance is short); `finalizeWithdraw` fetches the
 *      KMS decryption of the outcome and pays the USDC out. After 24 hours
 *      unfinalized the merchant's wallet may call `cancelWithdraw` itself.
 *   5. Receipts of a day not closed a day after it ended, or disputed, are
 *      redeemable on-chain by anyone holding them (`redeem`), with no call to us.
 *
 * Invariants:
 *   - The operator key sends one transaction at a time: within this process
 *     (a queue) and across replicas (`operatorLease`); each is awaited, and
 *     what decides whether to send is read while holding both, so nonces
 *     never race and no two replicas send the same finalization.
 *   - Nothing here writes a merchant address, a per-merchant amount or count
 *     to the chain before that merchant withdraws: batches carry slot ids and
 *     ciphertexts only.
 *   - No log is read: the vault indexes what the service looks up (payments
 *     by key and day, withdrawals by slot and nonce, their outcomes,
 *     challenges and what the bond paid per slot, day and attempt).
 *   - Every transaction's receipt is checked; a revert throws.
 *
 * Before broadcasting, the caller commits its intent (the service's rules);
 * each call here is idempotent so a retry after a crash is always safe.
 */
import {
  createPublicClient,
  createWalletClient,
  decodeEventLog,
  defineChain,
  getAddress,
  http,
  zeroAddress,
  type Address,
  type Hex,
  type LocalAccount,
  type TransactionReceipt,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { fheClient, relayerFheClient, type FheClient } from "./fhe.js";
import { keepAttribution } from "./attributions.js";
import {
  attributionTypes,
  enablementMessage,
  paymentBlinding,
  paymentCommitment,
  paymentKey,
  slotCommitment,
  slotSalt,
  vaultDomain,
  withdrawTypes,
  type WithdrawRequest,
} from "./messages.js";
import { confidentialVaultAbi } from "./vaultAbi.js";
import {
  CONFIDENTIAL_NETWORK,
  DayDisputedError,
  DayRejectedError,
  type CollectedPayment,
  type ConfidentialReceipt,
  type ConfidentialVault,
  type ConfidentialVaultOptions,
  type DayInfo,
  type DayPhase,
  type FhevmNetworkSettings,
  type OperatorKeyHold,
  type OperatorKeyLease,
  type PaymentState,
  type WithdrawalInfo,
  type WithdrawalLookup,
  type WithdrawalState,
} from "../../confidentialPort.js";

/**
 * Slots credited per transaction: each adds to a 128-bit running sum
 * (259,000 HCU, one after the other), and a transaction's sequential depth
 * is capped at 5,000,000 HCU, so at most 19 fit; 16 leaves room.
 */
const MAX_SLOTS_PER_TX = 16;
/** Slots released per transaction: independent adds, bounded by gas. */
const RELEASES_PER_TX = 32;
/** Payments returned per transaction. */
const RETURNS_PER_TX = 50;
/** Payments read per `dayPayments` call. */
const LEDGER_PAGE = 500;
const DAY_SECONDS = 86_400n;
const RECEIPT_TIMEOUT_MS = 120_000;
/** How long a withdrawal request the wallet signs stays valid, by default. */
const DEFAULT_WITHDRAW_VALIDITY_S = 3_600n;

export type {
  ConfidentialReceipt,
  ConfidentialVault,
  ConfidentialVaultOptions,
  DayCredit,
} from "../../confidentialPort.js";

function withdrawTypedData(chainId: number, vault: Address, request: WithdrawRequest) {
  return {
    domain: vaultDomain(chainId, vault),
    types: withdrawTypes,
    primaryType: "Withdraw" as const,
    message: request,
  };
}

const STATES: Record<number, WithdrawalState> = { 1: "debited", 2: "finalized", 3: "cancelled" };
const PAYMENT_STATES: Record<number, PaymentState> = {
  0: "none",
  1: "collected",
  2: "redeemed",
  3: "returned",
};
const PHASES: Record<number, DayPhase> = { 0: "open", 1: "closing", 2: "closed", 3: "disputed" };

async function createFheClient(opts: ConfidentialVaultOptions): Promise<{
  fhe: FheClient;
  close: () => void;
}> {
  if ("mock" in opts.mode) {
    const running = await opts.mode.mock();
    return { fhe: fheClient(running.instance), close: () => running.close() };
  }
  const fhe = await relayerFheClient(opts.mode, { chainId: opts.chainId, rpcUrl: opts.rpcUrl });
  return { fhe, close: () => undefined };
}

/**
 * Refuses to run against a chain without Zama's fhEVM at the configured
 * addresses: every encrypted operation of the vault would revert, and the
 * service would accept confidential payments it can never credit.
 */
async function requireFhevmHost(
  client: { getCode(args: { address: Address }): Promise<Hex | undefined> },
  settings: FhevmNetworkSettings,
): Promise<void> {
  const hosts = {
    ACL: settings.aclAddress,
    "FHE executor": settings.executorAddress,
    "KMS verifier": settings.kmsVerifierAddress,
    "input verifier": settings.inputVerifierAddress,
  };
  for (const [name, address] of Object.entries(hosts)) {
    const code = await client.getCode({ address });
    if (!code || code === "0x") {
      throw new Error(
        `confidential settlement cannot start: there is no fhEVM ${name} contract at ${address} on ${CONFIDENTIAL_NETWORK}; Zama's fhEVM must run on this chain at the configured CONFIDENTIAL_* addresses`,
      );
    }
  }
}

export async function createConfidentialVault(
  opts: ConfidentialVaultOptions,
): Promise<ConfidentialVault> {
  const slotsPerTx = opts.slotsPerTransaction ?? MAX_SLOTS_PER_TX;
  if (!Number.isInteger(slotsPerTx) || slotsPerTx < 1 || slotsPerTx > MAX_SLOTS_PER_TX) {
    throw new Error(`slotsPerTransaction must be 1 to ${MAX_SLOTS_PER_TX}, got ${slotsPerTx}`);
  }
  const chain = defineChain({
    id: opts.chainId,
    name: CONFIDENTIAL_NETWORK,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [opts.rpcUrl] } },
  });
  const transport = http(opts.rpcUrl);
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 100 });
  const operator = privateKeyToAccount(opts.operatorKey);
  const wallet = createWalletClient({ chain, transport, account: operator });
  const address = getAddress(opts.contractAddress);
  const vault = { address, abi: confidentialVaultAbi } as const;

  const [asset, onChainOperator, challengeWindow, bountyBase, bountyPerOpening] = await Promise.all(
    [
      publicClient.readContract({ ...vault, functionName: "asset" }),
      publicClient.readContract({ ...vault, functionName: "operator" }),
      publicClient.readContract({ ...vault, functionName: "challengeWindow" }),
      publicClient.readContract({ ...vault, functionName: "challengeBountyBase" }),
      publicClient.readContract({ ...vault, functionName: "challengeBountyPerOpening" }),
    ],
  );
  if (getAddress(onChainOperator) !== operator.address) {
    throw new Error(
      `the vault's operator is ${onChainOperator}, not the configured operator key's ${operator.address}`,
    );
  }
  if (!("mock" in opts.mode)) await requireFhevmHost(publicClient, opts.mode);
  const { fhe, close: closeFhe } = await createFheClient(opts);

  // The operator key, one transaction at a time: in this process each waits
  // for the one before; across replicas the lease lets one hold it. `work`
  // reads what decides its transaction while holding both.
  let queue: Promise<unknown> = Promise.resolve();
  const lease: OperatorKeyLease = opts.operatorLease ?? {
    hold: (work) => work({ ensureHeld: () => undefined }),
  };
  // The hold `exclusively` runs under (one at a time, by the queue).
  let current: OperatorKeyHold | null = null;
  const exclusively = <T>(work: () => Promise<T>): Promise<T> => {
    const held = () =>
      lease.hold(async (hold) => {
        current = hold;
        try {
          return await work();
        } finally {
          current = null;
        }
      });
    const run = queue.then(held, held);
    queue = run.catch(() => undefined);
    return run;
  };
  /**
   * Sends one operator transaction and waits for it; only inside
   * `exclusively`, and only while the lease is surely still this replica's.
   */
  const send = async (
    what: string,
    call: { functionName: string; args: readonly unknown[] },
  ): Promise<TransactionReceipt> => {
    if (!current) throw new Error(`${what}: the operator key is sent with only under its lease`);
    current.ensureHeld();
    const hash = await wallet.writeContract({
      ...vault,
      ...(call as { functionName: "closeDay"; args: [bigint] }),
    });
    const receipt = await publicClient.waitForTransactionReceipt({
      hash,
      timeout: RECEIPT_TIMEOUT_MS,
    });
    if (receipt.status !== "success") throw new Error(`${what} reverted (${hash})`);
    opts.log?.info({ what, txHash: hash, gasUsed: receipt.gasUsed.toString() }, "vault tx");
    return receipt;
  };
  const write = (what: string, call: { functionName: string; args: readonly unknown[] }) =>
    exclusively(() => send(what, call));

  const events = (receipt: TransactionReceipt) =>
    receipt.logs
      .filter((l) => getAddress(l.address) === address)
      .map((l) => decodeEventLog({ abi: confidentialVaultAbi, data: l.data, topics: l.topics }));

  const read = <T>(functionName: string, args: readonly unknown[] = []): Promise<T> =>
    publicClient.readContract({
      ...vault,
      functionName: functionName as "slotCount",
      args: args as [],
    }) as Promise<T>;

  const withdrawal = async (id: bigint): Promise<WithdrawalInfo> => {
    const [slot, to, amount, requestedAt, state, paid, debited] = await read<
      [bigint, Address, bigint, bigint, number, boolean, Hex]
    >("withdrawal", [id]);
    return {
      id,
      state: STATES[state] ?? "debited",
      slot,
      to,
      amount,
      requestedAt,
      cancellableAt: requestedAt + DAY_SECONDS,
      debitedHandle: debited,
      paid,
    };
  };

  const findWithdrawal = async (request: WithdrawRequest): Promise<WithdrawalLookup> => {
    const [found, id] = await read<[boolean, bigint]>("withdrawalOf", [
      request.slot,
      request.nonce,
    ]);
    if (!found) return { state: "unused" };
    const taken = await withdrawal(id);
    // Same slot and nonce, another address or amount: another signed request.
    if (getAddress(taken.to) !== getAddress(request.to) || taken.amount !== request.amount) {
      return { state: "usedByAnother" };
    }
    return { state: "landed", id };
  };

  const payment = async (key: Hex): Promise<CollectedPayment> => {
    const [payer, amount, day, state, commitment] = await read<
      [Address, bigint, number, number, Hex]
    >("payment", [key]);
    return {
      key,
      state: PAYMENT_STATES[state] ?? "none",
      payer,
      amount,
      day: Number(day),
      commitment,
    };
  };

  const dayInfo = async (day: number): Promise<DayInfo> => {
    const [
      [collected, payments, redeemed, returned, attempt, slotsCredited, slotsReleased, phase],
      [closedAt, openChallenges],
    ] = await Promise.all([
      read<[bigint, number, bigint, bigint, number, number, number, number, Hex]>("dayInfo", [
        BigInt(day),
      ]),
      read<[bigint, bigint, bigint]>("dayChallenges", [BigInt(day)]),
    ]);
    return {
      day,
      collected,
      payments: Number(payments),
      redeemed,
      returned,
      pool: collected - redeemed - returned,
      attempt: Number(attempt),
      slotsCredited: Number(slotsCredited),
      slotsReleased: Number(slotsReleased),
      phase: PHASES[phase] ?? "open",
      challengeWindowEndsAt: closedAt === 0n ? 0n : closedAt + challengeWindow,
      openChallenges: Number(openChallenges),
    };
  };

  /**
   * Submits the KMS's answer to every open challenge of `day`: the vault
   * keeps their ids per day, so no pass reads a challenge of another day.
   */
  const resolveChallenges = async (day: number) => {
    const open = await read<readonly bigint[]>("openChallengeIds", [BigInt(day)]);
    for (const id of open) {
      const [, , , , resolved, , handle] = await read<
        [bigint, number, number, bigint, boolean, bigint, Hex]
      >("challengeInfo", [id]);
      if (resolved) continue;
      const decryption = await fhe.publicDecrypt([handle]);
      const receipt = await exclusively(async () => {
        const [, , , , nowResolved] = await read<[bigint, number, number, bigint, boolean]>(
          "challengeInfo",
          [id],
        );
        if (nowResolved) return null; // the merchant's wallet, or anyone, was first
        return send("resolveChallenge", {
          functionName: "resolveChallenge",
          args: [id, decryption.cleartexts, decryption.proof],
        });
      });
      const outcome = receipt
        ? events(receipt).find((e) => e.eventName === "ChallengeResolved")
        : undefined;
      if (outcome?.eventName === "ChallengeResolved" && outcome.args.shortfall > 0n) {
        opts.log?.warn(
          { day, challenge: id.toString(), shortfall: outcome.args.shortfall.toString() },
          "a challenge proved the day's split short: the bond paid the shortfall, the day is disputed and the vault refuses every close until the bond owner resumes",
        );
      }
    }
  };

  /**
   * Refuses to close a day the vault would refuse: frozen by a proven
   * shortfall (the bond owner must resume), or a bond below this day's pool
   * and what the days not yet released hold.
   */
  const requireBondFor = async (info: DayInfo) => {
    const [bond, committed, frozen] = await Promise.all([
      read<bigint>("bond"),
      read<bigint>("bondCommitted"),
      read<boolean>("frozen"),
    ]);
    if (frozen) {
      throw new Error(
        `day ${info.day} cannot close: a challenge proved a day's split short, and the vault refuses every close until the bond owner resumes`,
      );
    }
    if (bond < committed + info.pool) {
      throw new Error(
        `day ${info.day} cannot close: the operator bond is ${bond}, below the ${committed + info.pool} that this day's pool and the days not yet released hold; the bond owner must deposit more (depositBond)`,
      );
    }
  };

  const dayPayments = async (day: number): Promise<CollectedPayment[]> => {
    const all: CollectedPayment[] = [];
    for (let offset = 0n; ; offset += BigInt(LEDGER_PAGE)) {
      const [keys, payers, amounts, states] = await read<[Hex[], Address[], bigint[], number[]]>(
        "dayPayments",
        [BigInt(day), offset, BigInt(LEDGER_PAGE)],
      );
      keys.forEach((key, i) =>
        all.push({
          key,
          state: PAYMENT_STATES[states[i]!] ?? "none",
          payer: getAddress(payers[i]!),
          amount: amounts[i]!,
          day,
          // Not in the ledger's page: read `payment(key)` where it matters.
          commitment: "0x",
        }),
      );
      if (keys.length < LEDGER_PAGE) return all;
    }
  };

  /** Slots credited in the day's current attempt, and slots whose credit is released. */
  const slotsOfDay = async (day: number, slotCount: bigint) => {
    const all = Array.from({ length: Number(slotCount) }, (_, i) => BigInt(i));
    const states = await Promise.all(
      all.map((s) => read<[boolean, boolean]>("slotDay", [s, BigInt(day)])),
    );
    return {
      all,
      credited: all.filter((_, i) => states[i]![0]),
      unreleased: all.filter((_, i) => states[i]![0] && !states[i]![1]),
    };
  };

  return {
    address,
    asset: getAddress(asset),
    network: CONFIDENTIAL_NETWORK,
    operator: operator.address,
    challengeWindow,
    challengeBounty: { base: bountyBase, perOpening: bountyPerOpening },

    enablementMessage: (merchant, accountRef) =>
      enablementMessage({ merchant, accountRef, vault: address, chainId: opts.chainId }),

    async assignSlot({ merchant, accountRef, walletSignature, viewer }) {
      const message = enablementMessage({
        merchant,
        accountRef,
        vault: address,
        chainId: opts.chainId,
      });
      // verifyMessage covers smart-contract wallets (ERC-1271) as well.
      const valid = await publicClient.verifyMessage({
        address: merchant,
        message,
        signature: walletSignature,
      });
      if (!valid) throw new Error(`the enablement signature is not ${merchant}'s`);
      const secret = slotSalt(walletSignature);
      const commitment = slotCommitment(merchant, secret);
      const lookup = () => read<[boolean, bigint]>("slotOf", [commitment]);
      return exclusively(async () => {
        const [assigned, slot] = await lookup();
        if (assigned) return { slot, txHash: null, secret };
        const receipt = await send("assignSlot", {
          functionName: "assignSlot",
          args: [commitment, viewer ? getAddress(viewer) : zeroAddress],
        });
        const [nowAssigned, newSlot] = await lookup();
        if (!nowAssigned) throw new Error(`assignSlot ${receipt.transactionHash} assigned no slot`);
        return { slot: newSlot, txHash: receipt.transactionHash, secret };
      });
    },

    async viewerOf(slot) {
      const viewer = await read<Address>("viewerOf", [slot]);
      return viewer === zeroAddress ? null : getAddress(viewer);
    },

    paymentKey: (payer, nonce) => paymentKey(payer, nonce),
    payment,
    dayInfo,
    dayPayments,

    async attribute({ payer, nonce, slot, salt }) {
      const key = paymentKey(getAddress(payer), nonce);
      const blinding = paymentBlinding(salt, key);
      const commitment = paymentCommitment(key, slot, blinding);
      const signature = await operator.signTypedData({
        domain: vaultDomain(opts.chainId, address),
        types: attributionTypes,
        primaryType: "Attribution",
        message: { key, commitment },
      });
      keepAttribution(address, key, { commitment, signature });
      return { key, blinding, commitment };
    },

    async receiptOf({ payer, nonce, slot, salt }) {
      const key = paymentKey(getAddress(payer), nonce);
      const blinding = paymentBlinding(salt, key);
      const commitment = paymentCommitment(key, slot, blinding);
      const collected = await payment(key);
      if (collected.state === "none") {
        throw new Error(`the vault has collected no payment ${key}; there is no receipt for it`);
      }
      if (collected.commitment.toLowerCase() !== commitment.toLowerCase()) {
        throw new Error(
          `the vault bound payment ${key} to commitment ${collected.commitment}, not to slot ${slot}'s ${commitment}`,
        );
      }
      const receipt: ConfidentialReceipt = {
        vault: address,
        key,
        payer: getAddress(payer),
        nonce,
        slot: slot.toString(),
        blinding,
        commitment,
        amount: collected.amount.toString(),
        day: collected.day,
      };
      return receipt;
    },

    presented: (key) => read<boolean>("presented", [key]),

    async penaltiesPaid(slot, day) {
      const { attempt } = await dayInfo(day);
      let total = 0n;
      for (let a = 0; a <= attempt; a++) {
        const [, penalized] = await read<[bigint, bigint]>("presentedOf", [slot, BigInt(day), a]);
        total += penalized;
      }
      return total;
    },

    async bountiesPaid(slot, day) {
      const { attempt } = await dayInfo(day);
      let total = 0n;
      for (let a = 0; a <= attempt; a++) {
        const [, paid] = await read<[bigint, bigint]>("bountyOf", [slot, BigInt(day), a]);
        total += paid;
      }
      return total;
    },

    async challenge(receipts) {
      const first = receipts[0];
      if (!first || receipts.some((r) => r.day !== first.day || r.slot !== first.slot)) {
        throw new Error("a challenge presents receipts of one day and one slot");
      }
      const r = await write("challenge", {
        functionName: "challenge",
        args: [
          BigInt(first.day),
          BigInt(first.slot),
          receipts.map((x) => ({ key: x.key, blinding: x.blinding })),
        ],
      });
      return r.transactionHash;
    },

    async creditDay({ day, credits, returns = [], shouldStop }) {
      if ((await dayInfo(day)).phase === "disputed") throw new DayDisputedError(day);
      if (!Number.isInteger(day) || day < 0) throw new Error(`day must be a UTC day number`);
      const stopIfAsked = () => {
        if (shouldStop?.()) throw new Error(`the batch of day ${day} was taken over; stopping`);
      };
      const txHashes: Hex[] = [];
      const [slotCount, now] = await Promise.all([
        read<bigint>("slotCount"),
        publicClient.getBlock().then((b) => b.timestamp),
      ]);
      let info = await dayInfo(day);
      if (info.phase === "open" && now < (BigInt(day) + 1n) * DAY_SECONDS) {
        throw new Error(`day ${day} has not ended on-chain yet (chain time ${now})`);
      }
      const returned: Hex[] = [];
      let alreadyCredited: bigint[] = [];
      let credited: bigint[] = [];

      if (info.phase === "open") {
        // 1. Payments no merchant claims go back to their payers first: they
        //    leave the pool the credits must add up to.
        for (let i = 0; i < returns.length; i += RETURNS_PER_TX) {
          stopIfAsked();
          const chunk = returns.slice(i, i + RETURNS_PER_TX);
          const r = await write("returnPayments", {
            functionName: "returnPayments",
            args: [BigInt(day), chunk],
          });
          txHashes.push(r.transactionHash);
          returned.push(...chunk);
        }
        info = await dayInfo(day);

        // 2. Refuse what the vault would reject: the credits must add up to
        //    the pool (the KMS proves it again on-chain).
        const amountOf = new Map<bigint, bigint>();
        for (const c of credits) {
          if (c.slot < 0n || c.slot >= slotCount) throw new Error(`slot ${c.slot} is not assigned`);
          if (amountOf.has(c.slot)) throw new Error(`slot ${c.slot} is listed twice`);
          if (c.amount < 0n || c.amount >= 2n ** 64n) throw new Error(`slot ${c.slot}: bad amount`);
          amountOf.set(c.slot, c.amount);
        }
        const sum = [...amountOf.values()].reduce((a, b) => a + b, 0n);
        if (sum !== info.pool) {
          throw new Error(
            `day ${day}: the credits add up to ${sum}, but the vault's pool for the day is ${info.pool}`,
          );
        }

        // 3. Every slot not yet credited in this attempt, into its pending bucket.
        const slots = await slotsOfDay(day, slotCount);
        alreadyCredited = slots.credited;
        credited = slots.all.filter((s) => !slots.credited.includes(s));
        for (let i = 0; i < credited.length; i += slotsPerTx) {
          stopIfAsked();
          const chunk = credited.slice(i, i + slotsPerTx);
          const { handles, inputProof } = await fhe.encryptAmounts(
            address,
            operator.address,
            chunk.map((s) => amountOf.get(s) ?? 0n),
          );
          const r = await write("creditSlots", {
            functionName: "creditSlots",
            args: [BigInt(day), chunk, handles, inputProof],
          });
          txHashes.push(r.transactionHash);
        }

        // 4. Close: the vault publishes whether the credits add up to the pool.
        stopIfAsked();
        await requireBondFor(info);
        const closed = await write("closeDay", { functionName: "closeDay", args: [BigInt(day)] });
        txHashes.push(closed.transactionHash);
        info = await dayInfo(day);
      }

      if (info.phase === "closing") {
        // 5. The KMS's proof of that check decides: closed, or rejected.
        stopIfAsked();
        const [, , , , , , , , matches] = await read<
          [bigint, number, bigint, bigint, number, number, number, number, Hex]
        >("dayInfo", [BigInt(day)]);
        const decryption = await fhe.publicDecrypt([matches]);
        const outcome = await exclusively(async () => {
          // Another replica (or anyone) may have submitted the proof already.
          const now = await dayInfo(day);
          if (now.phase !== "closing" || now.attempt !== info.attempt) return null;
          return send("finalizeDay", {
            functionName: "finalizeDay",
            args: [BigInt(day), decryption.cleartexts, decryption.proof],
          });
        });
        if (outcome) txHashes.push(outcome.transactionHash);
        const rejected = outcome
          ? events(outcome).some((e) => e.eventName === "DayRejected")
          : (await dayInfo(day)).phase === "open";
        if (rejected) {
          opts.log?.warn({ day, attempt: info.attempt }, "the vault rejected the day's credits");
          throw new DayRejectedError(day, info.attempt);
        }
        info = await dayInfo(day);
      }

      // 6. After the challenge window, with no challenge open, release the
      //    accepted credits into the balances (anyone may; we do).
      if (info.phase === "closed" && info.openChallenges > 0) {
        // A merchant's challenge waits for the KMS's answer, and the day's
        // release waits for it: anyone may submit the answer, so we do.
        await resolveChallenges(day);
        info = await dayInfo(day);
      }
      const chainNow = await publicClient.getBlock().then((b) => b.timestamp);
      if (info.phase === "disputed") throw new DayDisputedError(day);
      if (chainNow < info.challengeWindowEndsAt || info.openChallenges > 0) {
        opts.log?.info(
          {
            day,
            windowEndsAt: info.challengeWindowEndsAt.toString(),
            openChallenges: info.openChallenges,
          },
          "confidential day closed; released after its challenge window",
        );
        return {
          txHashes,
          alreadyCredited,
          credited,
          total: info.pool,
          returned,
          releasableAfter: info.challengeWindowEndsAt,
        };
      }
      const { unreleased } = await slotsOfDay(day, slotCount);
      for (let i = 0; i < unreleased.length; i += RELEASES_PER_TX) {
        stopIfAsked();
        const r = await write("release", {
          functionName: "release",
          args: [BigInt(day), unreleased.slice(i, i + RELEASES_PER_TX)],
        });
        txHashes.push(r.transactionHash);
      }
      opts.log?.info(
        { day, slots: Number(slotCount), credited: credited.length, pool: info.pool.toString() },
        "confidential day closed",
      );
      return {
        txHashes,
        alreadyCredited,
        credited,
        total: info.pool,
        returned,
        releasableAfter: null,
      };
    },

    async prepareWithdraw({ slot, merchant, amount, validForSeconds }) {
      const [info, now] = await Promise.all([
        read<[Hex, Hex, bigint, Address]>("slotInfo", [slot]),
        publicClient.getBlock().then((b) => b.timestamp),
      ]);
      const request: WithdrawRequest = {
        slot,
        to: getAddress(merchant),
        amount,
        nonce: info[2],
        deadline: now + (validForSeconds ?? DEFAULT_WITHDRAW_VALIDITY_S),
      };
      return { request, typedData: withdrawTypedData(opts.chainId, address, request) };
    },

    withdrawTypedData: (request) => withdrawTypedData(opts.chainId, address, request),

    findWithdrawal,

    submitWithdraw({ request, secret, signature }) {
      return exclusively(async () => {
        // Submitted before (a retry after a crash, another replica): that withdrawal.
        const found = await findWithdrawal(request);
        if (found.state === "landed") return { withdrawalId: found.id, txHash: null };
        if (found.state === "usedByAnother") {
          throw new Error(
            `withdrawal nonce ${request.nonce} of slot ${request.slot} was used by another request`,
          );
        }
        const receipt = await send("requestWithdraw", {
          functionName: "requestWithdraw",
          args: [request, secret, signature],
        });
        const event = events(receipt).find((e) => e.eventName === "WithdrawalRequested");
        if (!event || event.eventName !== "WithdrawalRequested") {
          throw new Error(`requestWithdraw ${receipt.transactionHash} emitted no withdrawal`);
        }
        return { withdrawalId: event.args.id, txHash: receipt.transactionHash };
      });
    },

    async finalizeWithdraw(id) {
      const settled = (w: WithdrawalInfo) => ({
        txHash: null,
        paid: w.paid,
        amount: w.amount,
        state: w.state,
      });
      const before = await withdrawal(id);
      if (before.state !== "debited") return settled(before);
      const decryption = await fhe.publicDecrypt([before.debitedHandle]);
      return exclusively(async () => {
        // Another replica may have finalized it meanwhile: its outcome stands.
        const w = await withdrawal(id);
        if (w.state !== "debited") return settled(w);
        const receipt = await send("finalizeWithdraw", {
          functionName: "finalizeWithdraw",
          args: [id, decryption.cleartexts, decryption.proof],
        });
        const event = events(receipt).find((e) => e.eventName === "WithdrawalFinalized");
        const paid = event?.eventName === "WithdrawalFinalized" ? event.args.paid : false;
        return {
          txHash: receipt.transactionHash,
          paid,
          amount: w.amount,
          state: "finalized" as const,
        };
      });
    },

    withdrawal,

    async dayCredit(slot, day) {
      const handle = await read<Hex>("slotDayCredit", [slot, BigInt(day)]);
      if (BigInt(handle) === 0n) return null;
      const [value] = await fhe.userDecrypt(address, [handle], operator as LocalAccount);
      return value ?? 0n;
    },

    async balance(slot) {
      const [, handle] = await read<[Hex, Hex, bigint, Address]>("slotInfo", [slot]);
      if (BigInt(handle) === 0n) return 0n;
      const [value] = await fhe.userDecrypt(address, [handle], operator as LocalAccount);
      return value ?? 0n;
    },

    chainTime: () => publicClient.getBlock().then((b) => b.timestamp),

    async close() {
      await queue;
      closeFhe();
    },
  };
}
