/**
 * The service's side of the confidential settlement vault
 * (`devnet/contracts/ConfidentialSettlementVault.sol`) on `eip155:8453`.
 *
 * How confidential settlement runs, and what this module does in it:
 *   1. Enablement: the merchant's wallet signs `enablementMessage`;
 *      `assignSlot` checks the signature, derives the slot's secret salt from
 *      it and binds a slot to `commitment(merchant, salt)` on-chain. Store the
 *      returned `slot` and `secret`: `submitWithdraw` needs the secret.
 *   2. Settling: the payer's ordinary USDC `transferWithAuthorization` pays
 *      the vault (`payTo` = `address`), exactly like any `exact` payment; the
 *      contract never sees the merchant. `signReceipt` then signs the
 *      merchant's receipt (returned in the settle response).
 *   3. The daily batch: `creditDay` (for a UTC day that has ended, during
 *      the day after it) marks the day's receipts, credits every slot with
 *      an encrypted amount (zero for a merchant who earned nothing) and
 *      closes the day. It is safe to call again after a crash at any point:
 *      the contract refuses a second credit per slot and day, and receipts
 *      already marked are skipped.
 *   4. Withdrawal: `prepareWithdraw` gives the EIP-712 request the merchant's
 *      wallet signs; `submitWithdraw` debits obliviously (the amount, or
 *      nothing when the balance is short); `finalizeWithdraw` fetches the
 *      KMS decryption of the outcome and pays the USDC out. After 24 hours
 *      unfinalized the merchant's wallet may call `cancelWithdraw` itself.
 *   5. Receipts whose credit is missing after their day's batch window are
 *      redeemable on-chain by anyone (`redeemReceipt`), with no call to us.
 *
 * Invariants:
 *   - The operator key is this module's alone: its transactions go out one
 *     at a time, each awaited, so nonces never race.
 *   - Nothing here writes a merchant address, a per-merchant amount or count
 *     to the chain before that merchant withdraws: batches carry slot ids and
 *     ciphertexts, receipts are marked by payer and nonce in key order.
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
  type Address,
  type Hex,
  type LocalAccount,
  type TransactionReceipt,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { fheClient, relayerFheClient, type FheClient } from "./fhe.js";
import {
  enablementMessage,
  receiptKey,
  receiptTypes,
  slotCommitment,
  slotSalt,
  vaultDomain,
  withdrawTypes,
  type Receipt,
  type WithdrawRequest,
} from "./messages.js";
import { confidentialVaultAbi } from "./vaultAbi.js";
import {
  CONFIDENTIAL_NETWORK,
  utcDay,
  type ConfidentialVault,
  type ConfidentialVaultOptions,
  type WithdrawalInfo,
  type WithdrawalLookup,
  type WithdrawalState,
} from "../../confidentialPort.js";

/** Slots credited per transaction: one input proof holds at most 32 `euint64`s. */
const DEFAULT_SLOTS_PER_TX = 16;
/** Receipts marked per transaction. */
const RECEIPTS_PER_TX = 200;
const DAY_SECONDS = 86_400n;
const RECEIPT_TIMEOUT_MS = 120_000;
/** How long a withdrawal request the wallet signs stays valid, by default. */
const DEFAULT_WITHDRAW_VALIDITY_S = 3_600n;

export type {
  ConfidentialVault,
  ConfidentialVaultOptions,
  DayCredit,
  SignedReceipt,
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

export async function createConfidentialVault(
  opts: ConfidentialVaultOptions,
): Promise<ConfidentialVault> {
  const slotsPerTx = opts.slotsPerTransaction ?? DEFAULT_SLOTS_PER_TX;
  if (!Number.isInteger(slotsPerTx) || slotsPerTx < 1 || slotsPerTx > 32) {
    throw new Error(`slotsPerTransaction must be 1 to 32, got ${slotsPerTx}`);
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
  const receiptSigner = privateKeyToAccount(opts.receiptSignerKey);
  const wallet = createWalletClient({ chain, transport, account: operator });
  const address = getAddress(opts.contractAddress);
  const vault = { address, abi: confidentialVaultAbi } as const;

  const [asset, onChainOperator, onChainSigner] = await Promise.all([
    publicClient.readContract({ ...vault, functionName: "asset" }),
    publicClient.readContract({ ...vault, functionName: "operator" }),
    publicClient.readContract({ ...vault, functionName: "receiptSigner" }),
  ]);
  if (getAddress(onChainOperator) !== operator.address) {
    throw new Error(
      `the vault's operator is ${onChainOperator}, not the configured operator key's ${operator.address}`,
    );
  }
  if (getAddress(onChainSigner) !== receiptSigner.address) {
    throw new Error(
      `the vault's receipt signer is ${onChainSigner}, not the configured key's ${receiptSigner.address}`,
    );
  }
  const { fhe, close: closeFhe } = await createFheClient(opts);

  // One operator transaction at a time: each waits for the one before.
  let queue: Promise<unknown> = Promise.resolve();
  const serially = <T>(work: () => Promise<T>): Promise<T> => {
    const run = queue.then(work, work);
    queue = run.catch(() => undefined);
    return run;
  };
  const write = (
    what: string,
    call: { functionName: string; args: readonly unknown[] },
  ): Promise<TransactionReceipt> =>
    serially(async () => {
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
    });

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
    const [slot, to, amount, requestedAt, state, debited] = await read<
      [bigint, Address, bigint, bigint, number, Hex]
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
    };
  };

  const finalizedOutcome = async (id: bigint): Promise<boolean> => {
    const logs = await publicClient.getContractEvents({
      ...vault,
      eventName: "WithdrawalFinalized",
      args: { id },
      fromBlock: 0n,
    });
    const last = logs.at(-1);
    if (!last) throw new Error(`withdrawal ${id} is finalized but its event was not found`);
    return last.args.paid ?? false;
  };

  const findWithdrawal = async (request: WithdrawRequest): Promise<WithdrawalLookup> => {
    const [, , nextNonce] = await read<[Hex, Hex, bigint, Address]>("slotInfo", [request.slot]);
    if (nextNonce <= request.nonce) return { state: "unused" };
    const logs = await publicClient.getContractEvents({
      ...vault,
      eventName: "WithdrawalRequested",
      args: { slot: request.slot, to: request.to },
      fromBlock: 0n,
    });
    const taken = logs.find((l) => l.args.nonce === request.nonce);
    // The nonce is used but its event was not read back (a provider that
    // returned too little): what took it is unknown, so nothing is concluded.
    if (!taken) {
      throw new Error(
        `withdrawal nonce ${request.nonce} of slot ${request.slot} is used, but its request was not found in the logs`,
      );
    }
    // Same slot, address and nonce, another amount: another signed request.
    if (taken.args.amount !== request.amount) return { state: "usedByAnother" };
    return { state: "landed", id: taken.args.id! };
  };

  return {
    address,
    asset: getAddress(asset),
    network: CONFIDENTIAL_NETWORK,
    operator: operator.address,
    receiptSigner: receiptSigner.address,

    enablementMessage: (merchant, accountRef) =>
      enablementMessage({ merchant, accountRef, vault: address, chainId: opts.chainId }),

    async assignSlot({ merchant, accountRef, walletSignature }) {
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
      const [assigned, slot] = await lookup();
      if (assigned) return { slot, txHash: null, secret };
      const receipt = await write("assignSlot", { functionName: "assignSlot", args: [commitment] });
      const [nowAssigned, newSlot] = await lookup();
      if (!nowAssigned) throw new Error(`assignSlot ${receipt.transactionHash} assigned no slot`);
      return { slot: newSlot, txHash: receipt.transactionHash, secret };
    },

    async signReceipt({ paymentNonce, payer, merchant, slot, amount, day }) {
      const receipt: Receipt = {
        payer: getAddress(payer),
        nonce: paymentNonce,
        merchant: getAddress(merchant),
        slot,
        amount,
        day: day ?? utcDay(new Date()),
      };
      const signature = await receiptSigner.signTypedData({
        domain: vaultDomain(opts.chainId, address),
        types: receiptTypes,
        primaryType: "Receipt",
        message: receipt,
      });
      return {
        receipt: {
          payer: receipt.payer,
          nonce: receipt.nonce,
          merchant: receipt.merchant,
          slot: slot.toString(),
          amount: amount.toString(),
          day: receipt.day,
        },
        signature,
        key: receiptKey(receipt.payer, receipt.nonce),
      };
    },

    async creditDay({ day, credits }) {
      if (!Number.isInteger(day) || day < 0) throw new Error(`day must be a UTC day number`);
      const [slotCount, info, now] = await Promise.all([
        read<bigint>("slotCount"),
        read<[bigint, number, number, boolean, Hex]>("dayInfo", [BigInt(day)]),
        publicClient.getBlock().then((b) => b.timestamp),
      ]);
      const allSlots = Array.from({ length: Number(slotCount) }, (_, i) => BigInt(i));
      if (info[3]) {
        return { txHashes: [], alreadyCredited: allSlots, credited: [], total: info[0] };
      }
      const opens = (BigInt(day) + 1n) * DAY_SECONDS;
      if (now < opens || now >= opens + DAY_SECONDS) {
        throw new Error(
          `day ${day}'s batch runs from ${opens} to ${opens + DAY_SECONDS} (unix s); chain time is ${now}`,
        );
      }
      const amountOf = new Map<bigint, bigint>();
      for (const c of credits) {
        if (c.slot < 0n || c.slot >= slotCount) throw new Error(`slot ${c.slot} is not assigned`);
        if (amountOf.has(c.slot)) throw new Error(`slot ${c.slot} is listed twice`);
        const sum = c.receipts.reduce((s, r) => s + r.amount, 0n);
        if (sum !== c.amount) {
          throw new Error(`slot ${c.slot}: amount ${c.amount} is not its receipts' sum ${sum}`);
        }
        if (c.amount < 0n || c.amount >= 2n ** 64n) throw new Error(`slot ${c.slot}: bad amount`);
        amountOf.set(c.slot, c.amount);
      }
      const txHashes: Hex[] = [];

      // 1. Mark the day's receipts, in key order (no link to the slots).
      const refs = credits
        .flatMap((c) => c.receipts)
        .map((r) => ({ ...r, payer: getAddress(r.payer), key: receiptKey(r.payer, r.nonce) }))
        .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      const marked = await Promise.all(
        refs.map((r) => read<[bigint, boolean]>("receiptInfo", [r.key])),
      );
      const unmarked = refs.filter((_, i) => marked[i]![0] !== BigInt(day) + 1n);
      for (let i = 0; i < unmarked.length; i += RECEIPTS_PER_TX) {
        const chunk = unmarked.slice(i, i + RECEIPTS_PER_TX).map(({ payer, nonce, amount }) => ({
          payer,
          nonce,
          amount,
        }));
        const r = await write("markReceipts", {
          functionName: "markReceipts",
          args: [BigInt(day), chunk],
        });
        txHashes.push(r.transactionHash);
      }

      // 2. Credit every slot not yet credited for the day, in chunks.
      const done = await Promise.all(
        allSlots.map((s) => read<boolean>("creditedOn", [s, BigInt(day)])),
      );
      const alreadyCredited = allSlots.filter((_, i) => done[i]);
      const pending = allSlots.filter((_, i) => !done[i]);
      for (let i = 0; i < pending.length; i += slotsPerTx) {
        const chunk = pending.slice(i, i + slotsPerTx);
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

      // 3. Close the day: book the total, check solvency, publish the audit flag.
      const closed = await write("closeDay", { functionName: "closeDay", args: [BigInt(day)] });
      txHashes.push(closed.transactionHash);
      const total = (await read<[bigint]>("dayInfo", [BigInt(day)]))[0];
      opts.log?.info(
        { day, slots: allSlots.length, credited: pending.length, total: total.toString() },
        "confidential day credited",
      );
      return { txHashes, alreadyCredited, credited: pending, total };
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

    async submitWithdraw({ request, secret, signature }) {
      // Submitted before (a retry after a crash): that withdrawal.
      const found = await findWithdrawal(request);
      if (found.state === "landed") return { withdrawalId: found.id, txHash: null };
      if (found.state === "usedByAnother") {
        throw new Error(
          `withdrawal nonce ${request.nonce} of slot ${request.slot} was used by another request`,
        );
      }
      const receipt = await write("requestWithdraw", {
        functionName: "requestWithdraw",
        args: [request, secret, signature],
      });
      const event = events(receipt).find((e) => e.eventName === "WithdrawalRequested");
      if (!event || event.eventName !== "WithdrawalRequested") {
        throw new Error(`requestWithdraw ${receipt.transactionHash} emitted no withdrawal`);
      }
      return { withdrawalId: event.args.id, txHash: receipt.transactionHash };
    },

    async finalizeWithdraw(id) {
      const w = await withdrawal(id);
      if (w.state === "finalized") {
        return { txHash: null, paid: await finalizedOutcome(id), amount: w.amount, state: w.state };
      }
      if (w.state === "cancelled") {
        return { txHash: null, paid: false, amount: w.amount, state: w.state };
      }
      const decryption = await fhe.publicDecrypt([w.debitedHandle]);
      const receipt = await write("finalizeWithdraw", {
        functionName: "finalizeWithdraw",
        args: [id, decryption.cleartexts, decryption.proof],
      });
      const event = events(receipt).find((e) => e.eventName === "WithdrawalFinalized");
      const paid = event?.eventName === "WithdrawalFinalized" ? event.args.paid : false;
      return { txHash: receipt.transactionHash, paid, amount: w.amount, state: "finalized" };
    },

    withdrawal,

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
