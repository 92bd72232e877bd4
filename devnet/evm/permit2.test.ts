/**
 * The devnet Permit2 and the x402 exact Permit2 proxy, at the contract level:
 * a Permit2 witness transfer signed with viem (with the same EIP-712 types the
 * official `@x402/evm` client signs) moves exactly the permitted amount of the
 * plain USDG token; a used nonce, a signature for another spender and a
 * redirected recipient all revert with Permit2's or the proxy's errors; a
 * contract owner is checked through ERC-1271.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  createPublicClient,
  createTestClient,
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
  permit2WitnessTypes,
  x402ExactPermit2ProxyABI,
  x402ExactPermit2ProxyAddress,
  PERMIT2_ADDRESS as X402_PERMIT2_ADDRESS,
} from "@x402/evm";
import { PERMIT2_ADDRESS, X402_EXACT_PERMIT2_PROXY_ADDRESS } from "./deploy.js";
import { startDevnet, type Devnet } from "./index.js";

const NETWORK = "eip155:4663";
const CHAIN_ID = 4663;
const USDG: Address = "0xe343167631d89B6Ffc58B88d6b7fB0228795491D";
const PAY_TO: Address = "0x000000000000000000000000000000000000bEEF";

const TOKEN_ABI = parseAbi([
  "function name() view returns (string)",
  "function symbol() view returns (string)",
  "function decimals() view returns (uint8)",
  "function balanceOf(address) view returns (uint256)",
  "function approve(address,uint256) returns (bool)",
]);
const PERMIT2_ABI = parseAbi([
  "function DOMAIN_SEPARATOR() view returns (bytes32)",
  "function nonceBitmap(address,uint256) view returns (uint256)",
  "function invalidateUnorderedNonces(uint256 wordPos, uint256 mask)",
]);
/** Permit2's errors, so a revert inside Permit2 decodes by name through the proxy. */
const PERMIT2_ERRORS = parseAbi([
  "error SignatureExpired(uint256 signatureDeadline)",
  "error InvalidAmount(uint256 maxAmount)",
  "error InvalidNonce()",
  "error InvalidSignature()",
  "error InvalidSigner()",
  "error InvalidSignatureLength()",
  "error InvalidContractSignature()",
]);
const PROXY_AND_PERMIT2_ERRORS = [...x402ExactPermit2ProxyABI, ...PERMIT2_ERRORS] as const;

describe("devnet Permit2 and x402 exact Permit2 proxy (eip155:4663, USDG)", () => {
  let devnet: Devnet;
  let client: PublicClient;
  let payer: PrivateKeyAccount;
  let submitter: PrivateKeyAccount;
  let chain: Chain;
  let nextNonce = 1000n;

  const balance = (who: Address) =>
    client.readContract({ address: USDG, abi: TOKEN_ABI, functionName: "balanceOf", args: [who] });

  const wallet = (account: PrivateKeyAccount) =>
    createWalletClient({ account, chain, transport: http(devnet.networks[NETWORK]!.rpcUrl) });

  /** Signs exactly what `@x402/evm`'s exact Permit2 client signs. */
  async function signPermit(opts: {
    amount: bigint;
    to: Address;
    spender?: Address;
    nonce?: bigint;
  }) {
    const permit = {
      permitted: { token: USDG, amount: opts.amount },
      nonce: opts.nonce ?? nextNonce++,
      deadline: BigInt(Math.floor(Date.now() / 1000) + 600),
    };
    const witness = { to: opts.to, validAfter: 0n };
    const signature = await payer.signTypedData({
      domain: { name: "Permit2", chainId: CHAIN_ID, verifyingContract: PERMIT2_ADDRESS },
      types: permit2WitnessTypes,
      primaryType: "PermitWitnessTransferFrom",
      message: {
        permitted: permit.permitted,
        spender: opts.spender ?? X402_EXACT_PERMIT2_PROXY_ADDRESS,
        nonce: permit.nonce,
        deadline: permit.deadline,
        witness,
      },
    });
    return { permit, witness, signature };
  }

  async function settle(
    signed: Awaited<ReturnType<typeof signPermit>>,
    to?: Address,
    owner: Address = payer.address,
  ) {
    const args = [
      signed.permit,
      owner,
      { ...signed.witness, to: to ?? signed.witness.to },
      signed.signature,
    ] as const;
    // Simulate first so a revert surfaces with its decoded error name.
    await client.simulateContract({
      account: submitter,
      address: X402_EXACT_PERMIT2_PROXY_ADDRESS,
      abi: PROXY_AND_PERMIT2_ERRORS,
      functionName: "settle",
      args,
    });
    const hash = await wallet(submitter).writeContract({
      address: X402_EXACT_PERMIT2_PROXY_ADDRESS,
      abi: x402ExactPermit2ProxyABI,
      functionName: "settle",
      args,
    });
    const receipt = await client.waitForTransactionReceipt({ hash });
    assert.equal(receipt.status, "success");
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
    submitter = privateKeyToAccount(info.facilitatorPrivateKeys[0] as Hex);
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

  test("the addresses are the ones @x402/evm uses, and USDG is a plain 6-decimal token", async () => {
    assert.equal(PERMIT2_ADDRESS, X402_PERMIT2_ADDRESS);
    assert.equal(X402_EXACT_PERMIT2_PROXY_ADDRESS, x402ExactPermit2ProxyAddress);
    assert.deepEqual(devnet.networks[NETWORK]!.assets, { USDG });
    const [name, symbol, decimals] = await Promise.all([
      client.readContract({ address: USDG, abi: TOKEN_ABI, functionName: "name" }),
      client.readContract({ address: USDG, abi: TOKEN_ABI, functionName: "symbol" }),
      client.readContract({ address: USDG, abi: TOKEN_ABI, functionName: "decimals" }),
    ]);
    assert.deepEqual([name, symbol, decimals], ["Global Dollar", "USDG", 6]);
    // No EIP-3009 and no EIP-2612 on USDG.
    await assert.rejects(
      client.readContract({
        address: USDG,
        abi: parseAbi(["function nonces(address) view returns (uint256)"]),
        functionName: "nonces",
        args: [payer.address],
      }),
    );
  });

  test("the proxy reports Permit2 and the x402 witness type", async () => {
    const read = (functionName: "PERMIT2" | "WITNESS_TYPE_STRING" | "WITNESS_TYPEHASH") =>
      client.readContract({
        address: X402_EXACT_PERMIT2_PROXY_ADDRESS,
        abi: x402ExactPermit2ProxyABI,
        functionName,
      });
    assert.equal(await read("PERMIT2"), PERMIT2_ADDRESS);
    assert.equal(
      await read("WITNESS_TYPE_STRING"),
      "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)",
    );
  });

  test("a witness transfer moves exactly the permitted amount and uses the nonce", async () => {
    const amount = 12_345n;
    const nonce = 7n * 256n + 3n; // word 7, bit 3
    const signed = await signPermit({ amount, to: PAY_TO, nonce });
    const [payerBefore, payToBefore] = await Promise.all([balance(payer.address), balance(PAY_TO)]);
    await settle(signed);
    const [payerAfter, payToAfter] = await Promise.all([balance(payer.address), balance(PAY_TO)]);
    assert.equal(payerBefore - payerAfter, amount);
    assert.equal(payToAfter - payToBefore, amount);
    const bitmap = await client.readContract({
      address: PERMIT2_ADDRESS,
      abi: PERMIT2_ABI,
      functionName: "nonceBitmap",
      args: [payer.address, 7n],
    });
    assert.equal(bitmap, 1n << 3n);
  });

  test("a replayed nonce reverts with InvalidNonce", async () => {
    const signed = await signPermit({ amount: 1_000n, to: PAY_TO });
    await settle(signed);
    await assert.rejects(settle(signed), /InvalidNonce/);
  });

  test("an invalidated nonce reverts with InvalidNonce", async () => {
    const nonce = 9n * 256n + 1n;
    const hash = await wallet(payer).writeContract({
      address: PERMIT2_ADDRESS,
      abi: PERMIT2_ABI,
      functionName: "invalidateUnorderedNonces",
      args: [9n, 1n << 1n],
    });
    await client.waitForTransactionReceipt({ hash });
    await assert.rejects(
      settle(await signPermit({ amount: 1n, to: PAY_TO, nonce })),
      /InvalidNonce/,
    );
  });

  test("a signature for another spender does not verify through the proxy", async () => {
    const signed = await signPermit({ amount: 1_000n, to: PAY_TO, spender: submitter.address });
    await assert.rejects(settle(signed), /InvalidSigner/);
  });

  test("a redirected recipient does not verify (the witness binds payTo)", async () => {
    const signed = await signPermit({ amount: 1_000n, to: PAY_TO });
    await assert.rejects(settle(signed, submitter.address), /InvalidSigner/);
  });

  test("the proxy rejects a zero destination", async () => {
    const signed = await signPermit({ amount: 1_000n, to: PAY_TO });
    await assert.rejects(
      settle(signed, "0x0000000000000000000000000000000000000000"),
      /InvalidDestination/,
    );
  });

  test("a contract owner authorizes through ERC-1271", async () => {
    // Raw runtime code: the accepting wallet returns the ERC-1271 magic value
    // for any hash and signature, the rejecting one returns zero.
    const accepting: Address = "0x0000000000000000000000000000000000001271";
    const rejecting: Address = "0x0000000000000000000000000000000000001272";
    const rpcUrl = devnet.networks[NETWORK]!.rpcUrl;
    const testClient = createTestClient({ chain, transport: http(rpcUrl), mode: "anvil" });
    await testClient.setCode({
      address: accepting,
      bytecode: "0x631626ba7e60e01b60005260206000f3",
    });
    await testClient.setCode({ address: rejecting, bytecode: "0x60206000f3" });
    for (const wallet1271 of [accepting, rejecting]) {
      await testClient.setBalance({ address: wallet1271, value: 10n ** 18n });
      await testClient.impersonateAccount({ address: wallet1271 });
      const asWallet = createWalletClient({ account: wallet1271, chain, transport: http(rpcUrl) });
      await client.waitForTransactionReceipt({
        hash: await asWallet.writeContract({
          address: USDG,
          abi: TOKEN_ABI,
          functionName: "approve",
          args: [PERMIT2_ADDRESS, maxUint256],
        }),
      });
      await testClient.stopImpersonatingAccount({ address: wallet1271 });
      await client.waitForTransactionReceipt({
        hash: await wallet(payer).writeContract({
          address: USDG,
          abi: parseAbi(["function transfer(address,uint256) returns (bool)"]),
          functionName: "transfer",
          args: [wallet1271, 10_000n],
        }),
      });
    }
    const signed = await signPermit({ amount: 4_000n, to: PAY_TO });
    const before = await balance(PAY_TO);
    await settle(signed, undefined, accepting);
    assert.equal(await balance(PAY_TO), before + 4_000n);
    assert.equal(await balance(accepting), 6_000n);
    await assert.rejects(
      settle(await signPermit({ amount: 4_000n, to: PAY_TO }), undefined, rejecting),
      /InvalidContractSignature/,
    );
  });

  test("without the approval of Permit2 the transfer fails", async () => {
    const other = privateKeyToAccount(devnet.networks[NETWORK]!.payerPrivateKeys[1] as Hex);
    const saved = payer;
    payer = other;
    try {
      await assert.rejects(
        settle(await signPermit({ amount: 1_000n, to: PAY_TO })),
        /TRANSFER_FROM_FAILED/,
      );
    } finally {
      payer = saved;
    }
  });
});
