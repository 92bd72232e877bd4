/**
 * The devnet x402 upto Permit2 proxy, at the contract level: the payer signs a
 * maximum (with the same EIP-712 types the official `@x402/evm` upto client
 * signs) naming the one facilitator allowed to settle; that facilitator may
 * move any amount up to the maximum, exactly once. Above the maximum, another
 * submitter, a changed witness and a replay all revert.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
  maxUint256,
  parseAbi,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
} from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import {
  uptoPermit2WitnessTypes,
  x402UptoPermit2ProxyABI,
  x402UptoPermit2ProxyAddress,
} from "@x402/evm";
import { PERMIT2_ADDRESS, X402_UPTO_PERMIT2_PROXY_ADDRESS } from "./deploy.js";
import { startDevnet, type Devnet } from "./index.js";

const NETWORK = "eip155:4663";
const CHAIN_ID = 4663;
const USDG: Address = "0xe343167631d89B6Ffc58B88d6b7fB0228795491D";
const PAY_TO: Address = "0x000000000000000000000000000000000000bEEF";
const MAX = 10_000n;

const TOKEN_ABI = parseAbi([
  "function balanceOf(address) view returns (uint256)",
  "function approve(address,uint256) returns (bool)",
]);
/** Permit2's errors, so a revert inside Permit2 decodes by name through the proxy. */
const PERMIT2_ERRORS = parseAbi([
  "error InvalidNonce()",
  "error InvalidSignature()",
  "error InvalidSigner()",
]);
const ERRORS = [...x402UptoPermit2ProxyABI, ...PERMIT2_ERRORS] as const;

describe("devnet x402 upto Permit2 proxy (eip155:4663, USDG)", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let chain: Chain;
  let payer: PrivateKeyAccount;
  let facilitator: PrivateKeyAccount;
  let stranger: PrivateKeyAccount;
  let nextNonce = 5000n;

  const balance = (who: Address) =>
    client.readContract({ address: USDG, abi: TOKEN_ABI, functionName: "balanceOf", args: [who] });

  const wallet = (account: PrivateKeyAccount) =>
    createWalletClient({ account, chain, transport: http(devnet.networks[NETWORK]!.rpcUrl) });

  /** Signs exactly what `@x402/evm`'s upto client signs, naming `facilitator`. */
  async function signMax() {
    const permit = {
      permitted: { token: USDG, amount: MAX },
      nonce: nextNonce++,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 600),
    };
    const witness = { to: PAY_TO, facilitator: facilitator.address, validAfter: 0n };
    const signature = await payer.signTypedData({
      domain: { name: "Permit2", chainId: CHAIN_ID, verifyingContract: PERMIT2_ADDRESS },
      types: uptoPermit2WitnessTypes,
      primaryType: "PermitWitnessTransferFrom",
      message: { ...permit, spender: X402_UPTO_PERMIT2_PROXY_ADDRESS, witness },
    });
    return { permit, witness, signature };
  }

  type Signed = Awaited<ReturnType<typeof signMax>>;

  /** Simulates first (so a revert decodes by name), then sends and mines. */
  async function settle(
    signed: Signed,
    amount: bigint,
    from: PrivateKeyAccount = facilitator,
    witness: Signed["witness"] = signed.witness,
  ): Promise<void> {
    const args = [signed.permit, amount, payer.address, witness, signed.signature] as const;
    await client.simulateContract({
      account: from,
      address: X402_UPTO_PERMIT2_PROXY_ADDRESS,
      abi: ERRORS,
      functionName: "settle",
      args,
    });
    const hash = await wallet(from).writeContract({
      address: X402_UPTO_PERMIT2_PROXY_ADDRESS,
      abi: x402UptoPermit2ProxyABI,
      functionName: "settle",
      args,
    });
    assert.equal((await client.waitForTransactionReceipt({ hash })).status, "success");
  }

  /** Settles and returns how much the payer and payTo balances moved. */
  async function moved(signed: Signed, amount: bigint): Promise<[bigint, bigint]> {
    const [p0, t0] = await Promise.all([balance(payer.address), balance(PAY_TO)]);
    await settle(signed, amount);
    const [p1, t1] = await Promise.all([balance(payer.address), balance(PAY_TO)]);
    return [p0 - p1, t1 - t0];
  }

  before(async () => {
    devnet = await startDevnet({ networks: [NETWORK], blockTimeSeconds: 0, outFile: null });
    const info = devnet.networks[NETWORK]!;
    chain = defineChain({
      id: CHAIN_ID,
      name: "USDG chain (devnet)",
      nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      rpcUrls: { default: { http: [info.rpcUrl] } },
    });
    client = createPublicClient({ chain, transport: http(info.rpcUrl), pollingInterval: 50 });
    payer = privateKeyToAccount(info.payerPrivateKeys[0] as Hex);
    facilitator = privateKeyToAccount(info.facilitatorPrivateKeys[0] as Hex);
    stranger = privateKeyToAccount(info.facilitatorPrivateKeys[1] as Hex);
    const hash = await wallet(payer).writeContract({
      address: USDG,
      abi: TOKEN_ABI,
      functionName: "approve",
      args: [PERMIT2_ADDRESS, maxUint256],
    });
    await client.waitForTransactionReceipt({ hash });
  });

  after(async () => {
    await devnet?.stop();
  });

  test("the proxy sits where @x402/evm expects it and points at Permit2", async () => {
    assert.equal(X402_UPTO_PERMIT2_PROXY_ADDRESS, x402UptoPermit2ProxyAddress);
    const permit2 = await client.readContract({
      address: X402_UPTO_PERMIT2_PROXY_ADDRESS,
      abi: x402UptoPermit2ProxyABI,
      functionName: "PERMIT2",
    });
    assert.equal(permit2, PERMIT2_ADDRESS);
  });

  test("a settle below the maximum moves exactly that amount", async () => {
    assert.deepEqual(await moved(await signMax(), 2_500n), [2_500n, 2_500n]);
  });

  test("a settle at the maximum moves the maximum", async () => {
    assert.deepEqual(await moved(await signMax(), MAX), [MAX, MAX]);
  });

  test("a settle above the maximum reverts and moves nothing", async () => {
    const before = await balance(payer.address);
    await assert.rejects(settle(await signMax(), MAX + 1n), /AmountExceedsPermitted/);
    assert.equal(await balance(payer.address), before);
  });

  test("only the facilitator named in the witness may settle", async () => {
    const signed = await signMax();
    await assert.rejects(settle(signed, 1n, stranger), /UnauthorizedFacilitator/);
    // Naming the stranger instead breaks the payer's signature.
    await assert.rejects(
      settle(signed, 1n, stranger, { ...signed.witness, facilitator: stranger.address }),
      /Invalid(Signature|Signer)/,
    );
    // A redirected recipient breaks it too.
    await assert.rejects(
      settle(signed, 1n, facilitator, { ...signed.witness, to: stranger.address }),
      /Invalid(Signature|Signer)/,
    );
    // The untouched payment still settles for its facilitator.
    assert.deepEqual(await moved(signed, 1n), [1n, 1n]);
  });

  test("a settled permit cannot be replayed, even for a smaller amount", async () => {
    const signed = await signMax();
    await settle(signed, 100n);
    await assert.rejects(settle(signed, 1n), /InvalidNonce/);
  });
});
