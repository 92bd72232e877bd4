/**
 * The confidential vault on the devnet's eip155:8453 with the fhEVM mock,
 * driven by raw transactions signed with the keys themselves (the
 * operator's, the bond owner's, the payers', a slot owner's): nothing of the
 * service stands in between.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import {
  concat,
  encodeAbiParameters,
  createPublicClient,
  createTestClient,
  http,
  toHex,
  type Abi,
  type Address,
  type Hex,
  type PrivateKeyAccount,
  type PublicClient,
  type TestClient,
  type TransactionReceipt,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { authorizationTypes, eip3009ABI } from "@x402/evm";
import { startDevnet, type Devnet } from "../../../devnet/evm/index.js";
import { loadArtifacts } from "../../../devnet/evm/compile.js";
import {
  confidentialVaultAbiOf,
  type ChallengeBounty,
} from "../../../devnet/evm/confidentialVault.js";
import { startDevnetFhevm, type DevnetFhevm } from "../../../devnet/evm/fhevm.js";
import { fheClient, type FheClient } from "../../../src/chains/evm/confidential/fhe.js";
import {
  attributionTypes,
  paymentBlinding,
  paymentCommitment,
  paymentKey,
  slotCommitment,
  vaultDomain,
  withdrawTypes,
} from "../../../src/chains/evm/confidential/messages.js";
import { devnetWallet } from "./devnetChain.js";
import { devnetKmsSignerKey } from "../../../devnet/evm/keys.js";

/** The gateway chain the devnet KMS's decryptions are signed for (devnet/evm/fhevm.ts). */
const DEVNET_GATEWAY = {
  chainId: 10901,
  decryption: "0x5ffdaAB0373E62E2ea2944776209aEf29E631A64",
} as const;

const VAULT_NETWORK = "eip155:8453";
export const VAULT_CHAIN_ID = 8453;
const DAY = 86_400n;

/** A slot bound to its owner's address and a salt only the owner knows. */
export interface OwnedSlot {
  owner: PrivateKeyAccount;
  salt: Hex;
  slot: bigint;
  /** The key of the slot's viewer (committed at assignment): it may decrypt the slot's pending credits and balance. */
  viewer: PrivateKeyAccount;
}

/** A payment the vault collected, and (when attributed) its opening: the receipt. */
export interface CollectedPayment {
  payer: Address;
  nonce: Hex;
  amount: bigint;
  key: Hex;
  /** The slot its commitment names and the blinding that opens it (none: unattributed). */
  opening?: { slot: bigint; blinding: Hex };
}

export interface DevnetVault {
  address: Address;
  abi: Abi;
  usdc: Address;
  rpcUrl: string;
  client: PublicClient;
  testClient: TestClient;
  fhe: FheClient;
  /** The vault's operator key as the helpers use it (see `resumeWith`). */
  readonly operator: PrivateKeyAccount;
  bondOwner: PrivateKeyAccount;
  read<T>(functionName: string, args?: unknown[]): Promise<T>;
  /** Sends a vault call as `account`; resolves to the receipt (reverts are mined, not thrown). */
  send(
    account: PrivateKeyAccount,
    functionName: string,
    args: unknown[],
  ): Promise<TransactionReceipt>;
  chainTime(): Promise<bigint>;
  /** Mines a block at `to` (unix seconds). */
  warp(to: bigint): Promise<void>;
  /** Moves the chain a minute into its next UTC day; that day's number. */
  nextDay(): Promise<number>;
  /** The chain's UTC day number. */
  today(): Promise<number>;
  usdcOf(who: Address): Promise<bigint>;
  /**
   * The operator assigns a slot to `owner` (a new key unless given) with
   * `viewer` (a new key unless given) as its viewer, and the owner gets gas.
   */
  assignSlot(owner?: PrivateKeyAccount, viewer?: PrivateKeyAccount): Promise<OwnedSlot>;
  /**
   * A payer's authorization to the vault, collected as the service collects
   * it: committed to `to`'s slot with the operator's attribution (`signer`
   * instead, to forge one), or unattributed when `to` is null.
   */
  pay(
    amount: bigint,
    payerIndex?: number,
    to?: OwnedSlot | null,
    signer?: PrivateKeyAccount,
  ): Promise<CollectedPayment>;
  /** A payer's signed authorization to the vault: `collect`'s arguments before the attribution. */
  authorize(amount: bigint, payerIndex?: number): Promise<{ key: Hex; args: unknown[] }>;
  /** The attribution `collect` takes: the commitment, then `signer`'s (the operator's) signature. */
  attribution(key: Hex, commitment: Hex, signer?: PrivateKeyAccount): Promise<Hex>;
  /** The operator's split of `day`: every slot, an encrypted zero where `credits` says nothing. */
  creditAll(day: number, credits: Map<bigint, bigint>): Promise<void>;
  /** Close, then the KMS's verdict on the sum: "success" when the day closed. */
  close(day: number): Promise<TransactionReceipt["status"]>;
  /**
   * The bond owner resumes a frozen vault with a new operator key (funded),
   * which the helpers use from then on; resolves to the transaction's receipt.
   */
  resumeWith(operator?: PrivateKeyAccount): Promise<TransactionReceipt>;
  /**
   * A public decryption the devnet's KMS signs with its public key (threshold
   * 1): `value` for `handle`, true or not. What a forged (or colluding) KMS
   * can hand any contract.
   */
  forgeDecryption(handle: Hex, value: bigint | boolean): Promise<{ cleartexts: Hex; proof: Hex }>;
  /** Someone with gas and no role: a merchant's watcher, a stranger. */
  someone(): Promise<PrivateKeyAccount>;
  /** Every slot assigned so far. */
  allSlots(): Promise<bigint[]>;
  /**
   * `from` challenges `slot`'s credit of `day` with the openings of `paid`,
   * then submits the KMS's answer; both must be mined successfully.
   */
  challengeAndResolve(
    from: PrivateKeyAccount,
    day: number,
    slot: bigint,
    paid: CollectedPayment[],
  ): Promise<{
    opened: TransactionReceipt;
    resolved: TransactionReceipt;
    id: bigint;
    shortfall: bigint;
  }>;
  /** A slot's balance, decrypted for the operator (the current key, or an earlier one it allowed). */
  balanceOf(slot: bigint): Promise<bigint>;
  /** The slot's owner withdraws `amount`: request, then finalize with the KMS's decryption. */
  withdraw(s: OwnedSlot, amount: bigint): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the devnet's eip155:8453 and an fhEVM mock of its own (`challengeWindowSeconds`: the vault's, default 0). */
export async function startDevnetVault(
  opts: { challengeWindowSeconds?: number; challengeBounty?: ChallengeBounty } = {},
): Promise<DevnetVault> {
  let devnet: Devnet | undefined;
  let fhevm: DevnetFhevm | undefined;
  const dir = mkdtempSync(join(tmpdir(), "devnet-vault-"));
  const stop = async () => {
    fhevm?.close();
    await devnet?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    devnet = await startDevnet({
      networks: [VAULT_NETWORK],
      blockTimeSeconds: 0,
      outFile: null,
      ...(opts.challengeWindowSeconds === undefined
        ? {}
        : { confidentialChallengeWindowSeconds: opts.challengeWindowSeconds }),
      ...(opts.challengeBounty === undefined
        ? {}
        : { confidentialChallengeBounty: opts.challengeBounty }),
    });
    const info = devnet.networks[VAULT_NETWORK]!;
    const abi = confidentialVaultAbiOf(await loadArtifacts());
    fhevm = await startDevnetFhevm({
      rpcUrl: info.rpcUrl,
      chainId: VAULT_CHAIN_ID,
      cleartextFile: join(dir, "cleartexts.jsonl"),
    });
    return vaultCalls({
      address: info.confidential!.contractAddress,
      abi,
      usdc: info.assets["USDC"]!,
      rpcUrl: info.rpcUrl,
      client: createPublicClient({ transport: http(info.rpcUrl), pollingInterval: 50 }),
      testClient: createTestClient({ transport: http(info.rpcUrl), mode: "anvil" }),
      fhe: fheClient(fhevm.instance),
      operator: privateKeyToAccount(info.confidential!.operatorPrivateKey),
      bondOwner: privateKeyToAccount(info.confidential!.bondOwnerPrivateKey),
      payerKeys: info.payerPrivateKeys,
      submitter: privateKeyToAccount(info.facilitatorPrivateKeys[0]!),
      stop,
    });
  } catch (e) {
    await stop();
    throw e;
  }
}

type VaultParts = Pick<
  DevnetVault,
  | "address"
  | "abi"
  | "usdc"
  | "rpcUrl"
  | "client"
  | "testClient"
  | "fhe"
  | "operator"
  | "bondOwner"
  | "stop"
> & { payerKeys: readonly Hex[]; submitter: PrivateKeyAccount };

function vaultCalls(parts: VaultParts): DevnetVault {
  const { address, abi, usdc, rpcUrl, client, testClient, fhe } = parts;
  // Every operator key so far, the current one last: a balance handle
  // written under an earlier key lets that key decrypt it.
  const operators = [parts.operator];
  const op = () => operators.at(-1)!;
  const read = <T>(functionName: string, args: unknown[] = []) =>
    client.readContract({ address, abi, functionName, args }) as Promise<T>;
  const send = async (account: PrivateKeyAccount, functionName: string, args: unknown[]) => {
    const hash = await devnetWallet(account, rpcUrl, VAULT_CHAIN_ID).writeContract({
      address,
      abi,
      functionName,
      args,
      gas: 8_000_000n,
    });
    return client.waitForTransactionReceipt({ hash });
  };
  const chainTime = async () => (await client.getBlock()).timestamp;
  const warp = async (to: bigint) => {
    await testClient.setNextBlockTimestamp({ timestamp: to });
    await testClient.mine({ blocks: 1 });
  };
  const attribution = async (key: Hex, commitment: Hex, signer = op()) =>
    concat([
      commitment,
      await signer.signTypedData({
        domain: vaultDomain(VAULT_CHAIN_ID, address),
        types: attributionTypes,
        primaryType: "Attribution",
        message: { key, commitment },
      }),
    ]);
  return {
    ...parts,
    get operator() {
      return op();
    },
    async resumeWith(next = privateKeyToAccount(generatePrivateKey())) {
      await testClient.setBalance({ address: next.address, value: 10n ** 18n });
      const r = await send(parts.bondOwner, "resume", [next.address]);
      if (r.status === "success") operators.push(next);
      return r;
    },
    read,
    send,
    attribution,
    async forgeDecryption(handle, value) {
      const cleartexts = encodeAbiParameters([{ type: "uint256" }], [BigInt(value)]);
      const kms = privateKeyToAccount(devnetKmsSignerKey());
      const signature = await kms.signTypedData({
        domain: {
          name: "Decryption",
          version: "1",
          chainId: DEVNET_GATEWAY.chainId,
          verifyingContract: DEVNET_GATEWAY.decryption,
        },
        types: {
          PublicDecryptVerification: [
            { name: "ctHandles", type: "bytes32[]" },
            { name: "decryptedResult", type: "bytes" },
            { name: "extraData", type: "bytes" },
          ],
        },
        primaryType: "PublicDecryptVerification",
        message: { ctHandles: [handle], decryptedResult: cleartexts, extraData: "0x00" },
      });
      return { cleartexts, proof: concat(["0x01", signature, "0x00"]) };
    },
    chainTime,
    warp,
    async nextDay() {
      const target = ((await chainTime()) / DAY + 1n) * DAY + 60n;
      await warp(target);
      return Number(target / DAY);
    },
    today: async () => Number((await chainTime()) / DAY),
    usdcOf: (who) =>
      client.readContract({
        address: usdc,
        abi: eip3009ABI,
        functionName: "balanceOf",
        args: [who],
      }),
    async assignSlot(
      owner = privateKeyToAccount(generatePrivateKey()),
      viewer = privateKeyToAccount(generatePrivateKey()),
    ) {
      const salt = toHex(randomBytes(32));
      const commitment = slotCommitment(owner.address, salt);
      assert.equal(
        (await send(op(), "assignSlot", [commitment, viewer.address])).status,
        "success",
      );
      const [, slot] = await read<[boolean, bigint]>("slotOf", [commitment]);
      await testClient.setBalance({ address: owner.address, value: 10n ** 18n });
      return { owner, salt, slot, viewer };
    },
    async authorize(amount, payerIndex = 0) {
      const payer = privateKeyToAccount(parts.payerKeys[payerIndex]!);
      const nonce = toHex(randomBytes(32));
      const validBefore = (await chainTime()) + 3600n;
      const signature = await payer.signTypedData({
        domain: {
          name: "USD Coin",
          version: "2",
          chainId: VAULT_CHAIN_ID,
          verifyingContract: usdc,
        },
        types: authorizationTypes,
        primaryType: "TransferWithAuthorization",
        message: {
          from: payer.address,
          to: address,
          value: amount,
          validAfter: 0n,
          validBefore,
          nonce,
        },
      });
      const key = paymentKey(payer.address, nonce);
      return { key, args: [payer.address, address, amount, 0n, validBefore, nonce, signature] };
    },
    async pay(amount, payerIndex = 0, to = null, signer = op()) {
      const { key, args: authorized } = await this.authorize(amount, payerIndex);
      const [payer, , , , , nonce] = authorized as [Address, Address, bigint, bigint, bigint, Hex];
      const opening = to ? { slot: to.slot, blinding: paymentBlinding(to.salt, key) } : undefined;
      const attributed = opening
        ? await attribution(key, paymentCommitment(key, opening.slot, opening.blinding), signer)
        : "0x";
      const args = [...authorized, attributed];
      assert.equal((await send(parts.submitter, "collect", args)).status, "success");
      return { payer, nonce, amount, key, ...(opening ? { opening } : {}) };
    },
    async someone() {
      const account = privateKeyToAccount(generatePrivateKey());
      await testClient.setBalance({ address: account.address, value: 10n ** 18n });
      return account;
    },
    async allSlots() {
      const count = await read<bigint>("slotCount");
      return Array.from({ length: Number(count) }, (_, i) => BigInt(i));
    },
    async challengeAndResolve(from, day, slot, paid) {
      const openings = paid.map((p) => ({ key: p.key, blinding: p.opening!.blinding }));
      const opened = await send(from, "challenge", [BigInt(day), slot, openings]);
      assert.equal(opened.status, "success", "the challenge was refused");
      const id = (await read<bigint>("challengeCount")) - 1n;
      const info = () =>
        read<[bigint, number, number, bigint, boolean, bigint, Hex]>("challengeInfo", [id]);
      const { cleartexts, proof } = await fhe.publicDecrypt([(await info())[6]]);
      const resolved = await send(from, "resolveChallenge", [id, cleartexts, proof]);
      assert.equal(resolved.status, "success");
      const [, , , , done, shortfall] = await info();
      assert.equal(done, true);
      return { opened, resolved, id, shortfall };
    },
    async creditAll(day, credits) {
      const count = await read<bigint>("slotCount");
      const all: [bigint, bigint][] = [];
      for (let s = 0n; s < count; s++) all.push([s, credits.get(s) ?? 0n]);
      for (let i = 0; i < all.length; i += 8) {
        const chunk = all.slice(i, i + 8);
        const { handles, inputProof } = await fhe.encryptAmounts(
          address,
          op().address,
          chunk.map(([, amount]) => amount),
        );
        const r = await send(op(), "creditSlots", [
          BigInt(day),
          chunk.map(([slot]) => slot),
          handles,
          inputProof,
        ]);
        assert.equal(r.status, "success");
      }
    },
    async close(day) {
      const closed = await send(op(), "closeDay", [BigInt(day)]);
      if (closed.status !== "success") return closed.status;
      const info = await read<unknown[]>("dayInfo", [BigInt(day)]);
      const { cleartexts, proof } = await fhe.publicDecrypt([info.at(-1) as Hex]);
      return (await send(op(), "finalizeDay", [BigInt(day), cleartexts, proof])).status;
    },
    async balanceOf(slot) {
      const [, handle] = await read<[Hex, Hex]>("slotInfo", [slot]);
      if (BigInt(handle) === 0n) return 0n;
      for (const key of [...operators].reverse()) {
        try {
          const [value] = await fhe.userDecrypt(address, [handle], key);
          return value ?? 0n;
        } catch {
          // Not this key's to decrypt: an earlier operator's balance handle.
        }
      }
      throw new Error(`no operator key may decrypt slot ${slot}'s balance`);
    },
    async withdraw(s, amount) {
      const [, , nonce] = await read<[Hex, Hex, bigint]>("slotInfo", [s.slot]);
      const request = {
        slot: s.slot,
        to: s.owner.address,
        amount,
        nonce,
        deadline: (await chainTime()) + 3600n,
      };
      const signature = await s.owner.signTypedData({
        domain: vaultDomain(VAULT_CHAIN_ID, address),
        types: withdrawTypes,
        primaryType: "Withdraw",
        message: request,
      });
      assert.equal(
        (await send(s.owner, "requestWithdraw", [request, s.salt, signature])).status,
        "success",
      );
      const id = (await read<bigint>("withdrawalCount")) - 1n;
      const w = await read<unknown[]>("withdrawal", [id]);
      const { cleartexts, proof } = await fhe.publicDecrypt([w.at(-1) as Hex]);
      assert.equal(
        (await send(s.owner, "finalizeWithdraw", [id, cleartexts, proof])).status,
        "success",
      );
    },
  };
}
