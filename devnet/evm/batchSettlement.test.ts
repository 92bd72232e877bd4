/**
 * The devnet batch-settlement escrow and its ERC-3009 deposit collector at the
 * contract level: channel ids match the official client's computation; a
 * deposit escrows exactly its amount; only the receiver side may claim, only
 * with the payer's voucher and never above its ceiling; a signed refund dies
 * once its nonce is used; collectors answer only to the escrow.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeAbiParameters,
  http,
  keccak256,
  parseAbi,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
} from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { computeChannelId } from "@x402/evm/batch-settlement/client";
import {
  X402_BATCH_SETTLEMENT_ADDRESS as ESCROW,
  X402_ERC3009_DEPOSIT_COLLECTOR_ADDRESS as COLLECTOR,
} from "./deploy.js";
import { startDevnet, type Devnet } from "./index.js";

const NETWORK = "eip155:8453";
const CHAIN_ID = 8453;
const CONFIG_TUPLE =
  "(address payer, address payerAuthorizer, address receiver, address receiverAuthorizer, address token, uint40 withdrawDelay, bytes32 salt)";
const ESCROW_ABI = parseAbi([
  `function deposit(${CONFIG_TUPLE} config, uint128 amount, address collector, bytes collectorData)`,
  `function claim(((${CONFIG_TUPLE} channel, uint128 maxClaimableAmount) voucher, bytes signature, uint128 totalClaimed)[] voucherClaims)`,
  `function refundWithSignature(${CONFIG_TUPLE} config, uint128 amount, uint256 nonce, bytes receiverAuthorizerSignature)`,
  `function getChannelId(${CONFIG_TUPLE} config) view returns (bytes32)`,
  "function channels(bytes32) view returns (uint128 balance, uint128 totalClaimed)",
  "function receivers(address, address) view returns (uint128 totalClaimed, uint128 totalSettled)",
  "function refundNonce(bytes32) view returns (uint256)",
  "error NotAuthorizedToClaim()",
  "error InvalidSignature()",
  "error ClaimExceedsCeiling()",
  "error InvalidRefundNonce()",
]);
const COLLECTOR_ABI = parseAbi([
  "function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes data)",
  "error OnlyX402BatchSettlement()",
]);
const DOMAIN = {
  name: "x402 Batch Settlement",
  version: "1",
  chainId: CHAIN_ID,
  verifyingContract: ESCROW,
} as const;

describe("devnet batch-settlement escrow and ERC-3009 deposit collector", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let chain: Chain;
  let usdc: Address;
  let payer: PrivateKeyAccount;
  let receiver: PrivateKeyAccount;
  const authorizer = privateKeyToAccount(generatePrivateKey());
  const config = () => ({
    payer: payer.address,
    payerAuthorizer: "0x0000000000000000000000000000000000000000" as Address,
    receiver: receiver.address,
    receiverAuthorizer: authorizer.address,
    token: usdc,
    withdrawDelay: 900,
    salt: `0x${"11".repeat(32)}` as Hex,
  });

  const send = async (
    account: PrivateKeyAccount,
    functionName: "deposit" | "claim" | "refundWithSignature",
    args: readonly unknown[],
  ): Promise<string> => {
    try {
      await client.simulateContract({
        account,
        address: ESCROW,
        abi: ESCROW_ABI,
        functionName,
        args: args as never,
      });
    } catch (e) {
      return (e as Error).message;
    }
    const hash = await createWalletClient({ account, chain, transport: http() }).writeContract({
      address: ESCROW,
      abi: ESCROW_ABI,
      functionName,
      args: args as never,
    });
    assert.equal((await client.waitForTransactionReceipt({ hash })).status, "success");
    return "ok";
  };

  const voucher = async (signer: PrivateKeyAccount, channelId: Hex, max: bigint) =>
    signer.signTypedData({
      domain: DOMAIN,
      types: {
        Voucher: [
          { name: "channelId", type: "bytes32" },
          { name: "maxClaimableAmount", type: "uint128" },
        ],
      },
      primaryType: "Voucher",
      message: { channelId, maxClaimableAmount: max },
    });

  before(async () => {
    devnet = await startDevnet({
      networks: [NETWORK],
      blockTimeSeconds: 0,
      outFile: null,
      payers: 2,
    });
    const info = devnet.networks[NETWORK]!;
    chain = defineChain({
      id: CHAIN_ID,
      name: "Base (devnet)",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [info.rpcUrl] } },
    });
    client = createPublicClient({ chain, transport: http() });
    usdc = info.assets["USDC"]! as Address;
    payer = privateKeyToAccount(info.payerPrivateKeys[0] as Hex);
    receiver = privateKeyToAccount(info.payerPrivateKeys[1] as Hex);
  });
  after(async () => {
    await devnet?.stop();
  });

  test("the channel id on-chain is the one the official client computes", async () => {
    const onChain = await client.readContract({
      address: ESCROW,
      abi: ESCROW_ABI,
      functionName: "getChannelId",
      args: [config()],
    });
    assert.equal(onChain, computeChannelId(config(), NETWORK));
  });

  test("deposit through the collector, then claims: receiver side only, payer's voucher only, never above the ceiling", async () => {
    const channelId = computeChannelId(config(), NETWORK);
    const salt = 42n;
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + 600);
    const authorization = await payer.signTypedData({
      domain: { name: "USD Coin", version: "2", chainId: CHAIN_ID, verifyingContract: usdc },
      types: {
        ReceiveWithAuthorization: [
          { name: "from", type: "address" },
          { name: "to", type: "address" },
          { name: "value", type: "uint256" },
          { name: "validAfter", type: "uint256" },
          { name: "validBefore", type: "uint256" },
          { name: "nonce", type: "bytes32" },
        ],
      },
      primaryType: "ReceiveWithAuthorization",
      message: {
        from: payer.address,
        to: COLLECTOR,
        value: 10_000n,
        validAfter: 0n,
        validBefore,
        nonce: keccak256(
          encodeAbiParameters([{ type: "bytes32" }, { type: "uint256" }], [channelId, salt]),
        ),
      },
    });
    const data = encodeAbiParameters(
      [{ type: "uint256" }, { type: "uint256" }, { type: "uint256" }, { type: "bytes" }],
      [0n, validBefore, salt, authorization],
    );
    // Anyone may submit a deposit (the facilitator does); here the receiver.
    assert.equal(await send(receiver, "deposit", [config(), 10_000n, COLLECTOR, data]), "ok");
    const [balance] = await client.readContract({
      address: ESCROW,
      abi: ESCROW_ABI,
      functionName: "channels",
      args: [channelId],
    });
    assert.equal(balance, 10_000n);

    const row = async (signer: PrivateKeyAccount, max: bigint, total: bigint) => ({
      voucher: { channel: config(), maxClaimableAmount: max },
      signature: await voucher(signer, channelId, max),
      totalClaimed: total,
    });
    assert.match(
      await send(payer, "claim", [[await row(payer, 3_000n, 3_000n)]]),
      /NotAuthorizedToClaim/,
    );
    assert.match(
      await send(receiver, "claim", [[await row(receiver, 3_000n, 3_000n)]]),
      /InvalidSignature/,
    );
    assert.match(
      await send(receiver, "claim", [[await row(payer, 3_000n, 3_001n)]]),
      /ClaimExceedsCeiling/,
    );
    assert.equal(await send(receiver, "claim", [[await row(payer, 3_000n, 3_000n)]]), "ok");
    const [claimed] = await client.readContract({
      address: ESCROW,
      abi: ESCROW_ABI,
      functionName: "receivers",
      args: [receiver.address, usdc],
    });
    assert.equal(claimed, 3_000n);
  });

  test("a signed refund works once: its nonce cannot be replayed", async () => {
    const channelId = computeChannelId(config(), NETWORK);
    const sign = (nonce: bigint, amount: bigint) =>
      authorizer.signTypedData({
        domain: DOMAIN,
        types: {
          Refund: [
            { name: "channelId", type: "bytes32" },
            { name: "nonce", type: "uint256" },
            { name: "amount", type: "uint128" },
          ],
        },
        primaryType: "Refund",
        message: { channelId, nonce, amount },
      });
    const refund = [config(), 1_000n, 0n, await sign(0n, 1_000n)] as const;
    assert.equal(await send(payer, "refundWithSignature", refund), "ok");
    assert.match(await send(payer, "refundWithSignature", refund), /InvalidRefundNonce/);
    assert.equal(
      await client.readContract({
        address: ESCROW,
        abi: ESCROW_ABI,
        functionName: "refundNonce",
        args: [channelId],
      }),
      1n,
    );
  });

  test("a collector answers only to the escrow", async () => {
    await assert.rejects(
      client.simulateContract({
        account: payer,
        address: COLLECTOR,
        abi: COLLECTOR_ABI,
        functionName: "collect",
        args: [payer.address, usdc, 1n, `0x${"00".repeat(32)}`, "0x"],
      }),
      /OnlyX402BatchSettlement/,
    );
  });
});
