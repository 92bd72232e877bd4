/**
 * The devnet: deterministic keys, the devnet file, anvil process handling,
 * and above all that the devnet token at the canonical USDC address behaves
 * like FiatToken v2.2 for everything x402 uses, down to the revert reasons.
 * The last check of the automine suite runs the unmodified official
 * `@x402/evm` client and facilitator mechanisms against it.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  hashDomain,
  http,
  parseAbi,
  parseEther,
  parseSignature,
  publicActions,
  toHex,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
} from "viem";
import { mnemonicToAccount, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { authorizationTypes, toClientEvmSigner, toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from "@x402/evm/exact/facilitator";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { startAnvil } from "./anvil.js";
import { MULTICALL3_ADDRESS } from "./deploy.js";
import {
  DEVNET_MNEMONIC,
  devnetDeployerKey,
  devnetFacilitatorKeys,
  devnetPayerKeys,
} from "./keys.js";
import {
  readDevnetFile,
  startDevnet,
  updateDevnetFile,
  writeDevnetFile,
  type Devnet,
  type DevnetFile,
} from "./index.js";

const USDC: Address = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const MINTED = 1_000_000n * 10n ** 6n;
const FAR_FUTURE = 2n ** 40n;
const DOMAIN = { name: "USD Coin", version: "2", chainId: 8453, verifyingContract: USDC } as const;

const TOKEN_ABI = parseAbi([
  "function name() view returns (string)",
  "function symbol() view returns (string)",
  "function version() view returns (string)",
  "function decimals() view returns (uint8)",
  "function totalSupply() view returns (uint256)",
  "function balanceOf(address) view returns (uint256)",
  "function allowance(address, address) view returns (uint256)",
  "function nonces(address) view returns (uint256)",
  "function owner() view returns (address)",
  "function DOMAIN_SEPARATOR() view returns (bytes32)",
  "function authorizationState(address, bytes32) view returns (bool)",
  "function transfer(address to, uint256 value) returns (bool)",
  "function transferFrom(address from, address to, uint256 value) returns (bool)",
  "function mint(address to, uint256 amount) returns (bool)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)",
  "function receiveWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
  "function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)",
  "function permit(address owner, address spender, uint256 value, uint256 deadline, bytes signature)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)",
]);

const PERMIT_TYPES = {
  Permit: [
    { name: "owner", type: "address" },
    { name: "spender", type: "address" },
    { name: "value", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
} as const;

/** EIP-3009's two authorization types (the x402 package exports only the first). */
const AUTHORIZATION_TYPES = {
  TransferWithAuthorization: authorizationTypes.TransferWithAuthorization,
  ReceiveWithAuthorization: authorizationTypes.TransferWithAuthorization,
} as const;

const CANCEL_TYPES = {
  CancelAuthorization: [
    { name: "authorizer", type: "address" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

// Minimal ERC-1271 wallets as raw runtime code. Accepting: returns the magic
// value 0x1626ba7e (left-aligned in 32 bytes) for any call. Rejecting:
// returns 32 zero bytes.
const ERC1271_ACCEPT: Hex = "0x631626ba7e60e01b60005260206000f3";
const ERC1271_REJECT: Hex = "0x60206000f3";

const randomNonce = (): Hex => toHex(randomBytes(32));
const tempFile = (name: string): string => join(mkdtempSync(join(tmpdir(), "devnet-test-")), name);

function chainOf(rpcUrl: string, id = 8453): Chain {
  return defineChain({
    id,
    name: "devnet",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

function authorization(from: Address, to: Address, value: bigint): Authorization {
  return { from, to, value, validAfter: 0n, validBefore: FAR_FUTURE, nonce: randomNonce() };
}

async function sign(
  signer: PrivateKeyAccount,
  primaryType: "TransferWithAuthorization" | "ReceiveWithAuthorization",
  auth: Authorization,
): Promise<Hex> {
  return signer.signTypedData({
    domain: DOMAIN,
    types: AUTHORIZATION_TYPES,
    primaryType,
    message: auth,
  });
}

/** The v,r,s form FiatToken's first overload takes (v is 27 or 28). */
function vrs(signature: Hex): readonly [number, Hex, Hex] {
  const { r, s, yParity } = parseSignature(signature);
  return [27 + yParity, r, s];
}

const argsOf = (a: Authorization) =>
  [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce] as const;

// ---------------------------------------------------------------------------

describe("devnet keys", () => {
  test("match viem's mnemonic derivation at the documented HD indexes", () => {
    const [f0, f1] = devnetFacilitatorKeys(2);
    const [p0] = devnetPayerKeys(1);
    const keyOf = (opts: { accountIndex?: number; addressIndex?: number }) =>
      toHex(mnemonicToAccount(DEVNET_MNEMONIC, opts).getHdKey().privateKey!);
    assert.equal(f0, keyOf({ addressIndex: 0 }));
    assert.equal(f1, keyOf({ addressIndex: 1 }));
    assert.equal(p0, keyOf({ addressIndex: 100 }));
    assert.equal(devnetDeployerKey(), keyOf({ accountIndex: 1 }));
    // Index 0 is anvil's and Hardhat's well-known first account.
    assert.equal(privateKeyToAccount(f0!).address, "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
  });

  test("are stable and distinct", () => {
    assert.deepEqual(devnetPayerKeys(3), devnetPayerKeys(3));
    const all = [...devnetFacilitatorKeys(4), ...devnetPayerKeys(5), devnetDeployerKey()];
    assert.equal(new Set(all).size, all.length);
    assert.throws(() => devnetFacilitatorKeys(101), /facilitator key count/);
    assert.throws(() => devnetPayerKeys(-1), /payer key count/);
  });
});

describe("devnet file", () => {
  const sample: DevnetFile = {
    version: 1,
    startedAt: "2026-01-01T00:00:00.000Z",
    blockTimeSeconds: 1,
    networks: {},
  };

  test("update merges at the top level and keeps unknown fields", async () => {
    const path = tempFile("devnet.json");
    writeFileSync(path, JSON.stringify({ ...sample, somethingElse: { keep: true } }));
    await updateDevnetFile(path, { facilitatorUrl: "http://127.0.0.1:4020", apiKey: "k" });
    const raw = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    assert.deepEqual(raw["somethingElse"], { keep: true });
    assert.equal(raw["facilitatorUrl"], "http://127.0.0.1:4020");
    assert.equal((await readDevnetFile(path)).apiKey, "k");
    // Holds keys: owner-only.
    assert.equal(statSync(path).mode & 0o077, 0);
  });

  test("write creates the folder; read rejects what is not a devnet file", async () => {
    const path = join(tempFile("x"), "..", "nested", "devnet.json");
    await writeDevnetFile(path, sample);
    assert.deepEqual(await readDevnetFile(path), sample);
    writeFileSync(path, JSON.stringify({ version: 2 }));
    await assert.rejects(readDevnetFile(path), /not a devnet file/);
  });
});

describe("anvil process", () => {
  test("a taken port fails fast with anvil's own error; stop is idempotent", async () => {
    const node = await startAnvil({ chainId: 31337, blockTimeSeconds: 0 });
    try {
      await assert.rejects(
        startAnvil({ chainId: 31338, blockTimeSeconds: 0, port: node.port }),
        // anvil's own bind error, or (when our readiness probe is quicker
        // than its exit) the other node's chain id: either way, not started.
        /exited during start.*(in use|98)|another node holds that port/is,
      );
    } finally {
      await node.stop();
      await node.stop();
    }
    await assert.rejects(fetch(node.rpcUrl), /fetch failed/);
  });
});

describe("startDevnet arguments", () => {
  test("an unknown network is refused with the valid ids, before anything starts", async () => {
    await assert.rejects(
      startDevnet({ networks: ["eip155:999999"], outFile: null }),
      /unknown network "eip155:999999"; valid: eip155:8453, /,
    );
  });
});

// ---------------------------------------------------------------------------

describe("devnet with one block per transaction", () => {
  let devnet: Devnet;
  let outFile: string;
  let rpcUrl: string;
  let chain: Chain;
  let pub: PublicClient;
  let payers: PrivateKeyAccount[];
  let relayer: PrivateKeyAccount;

  before(async () => {
    outFile = tempFile("devnet.json");
    devnet = await startDevnet({ networks: ["eip155:8453"], blockTimeSeconds: 0, outFile });
    const info = devnet.networks["eip155:8453"]!;
    rpcUrl = info.rpcUrl;
    chain = chainOf(rpcUrl);
    pub = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 50 });
    payers = info.payerPrivateKeys.map((k) => privateKeyToAccount(k));
    relayer = privateKeyToAccount(info.facilitatorPrivateKeys[0]!);
  });
  after(() => devnet?.stop());

  const read = <T>(functionName: string, args: readonly unknown[] = []): Promise<T> =>
    pub.readContract({
      address: USDC,
      abi: TOKEN_ABI,
      functionName: functionName as never,
      args: args as never,
    }) as Promise<T>;
  const balance = (who: Address) => read<bigint>("balanceOf", [who]);

  /** Sends a token call and returns the receipt; rejects with the revert reason. */
  async function call(from: PrivateKeyAccount, functionName: string, args: readonly unknown[]) {
    // Simulating first turns a revert into an error carrying the reason.
    const { request } = await pub.simulateContract({
      account: from,
      address: USDC,
      abi: TOKEN_ABI,
      functionName: functionName as never,
      args: args as never,
    });
    const wallet = createWalletClient({ account: from, chain, transport: http(rpcUrl) });
    const hash = await wallet.writeContract(request);
    const receipt = await pub.waitForTransactionReceipt({ hash });
    assert.equal(receipt.status, "success");
    return receipt;
  }

  test("the devnet file has the documented shape", () => {
    const file = JSON.parse(readFileSync(outFile, "utf8")) as Record<string, unknown>;
    assert.deepEqual(Object.keys(file).sort(), [
      "blockTimeSeconds",
      "networks",
      "startedAt",
      "version",
    ]);
    assert.equal(file["version"], 1);
    assert.equal(file["blockTimeSeconds"], 0);
    assert.ok(!Number.isNaN(Date.parse(String(file["startedAt"]))));
    const networks = file["networks"] as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(networks), ["eip155:8453"]);
    const net = networks["eip155:8453"]!;
    assert.deepEqual(Object.keys(net).sort(), [
      "assets",
      "chainId",
      "confidential",
      "facilitatorPrivateKeys",
      "payerPrivateKeys",
      "rpcUrl",
    ]);
    assert.match(String(net["rpcUrl"]), /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(net["chainId"], 8453);
    assert.deepEqual(net["assets"], { USDC });
    assert.deepEqual(net["payerPrivateKeys"], devnetPayerKeys(5));
    assert.deepEqual(net["facilitatorPrivateKeys"], devnetFacilitatorKeys(4));
    assert.deepEqual(Object.keys(net["confidential"] as object).sort(), [
      "bondOwnerPrivateKey",
      "contractAddress",
      "operatorPrivateKey",
    ]);
    assert.deepEqual(devnet.file, JSON.parse(readFileSync(outFile, "utf8")));
  });

  test("USDC sits at the canonical address with Base's EIP-712 domain", async () => {
    assert.equal(await pub.getChainId(), 8453);
    assert.equal(await read("name"), "USD Coin");
    assert.equal(await read("symbol"), "USDC");
    assert.equal(await read("version"), "2");
    assert.equal(await read("decimals"), 6);
    assert.equal(await read("owner"), privateKeyToAccount(devnetDeployerKey()).address);
    assert.equal(
      await read("DOMAIN_SEPARATOR"),
      hashDomain({
        domain: { ...DOMAIN, chainId: BigInt(DOMAIN.chainId) },
        types: {
          EIP712Domain: [
            { name: "name", type: "string" },
            { name: "version", type: "string" },
            { name: "chainId", type: "uint256" },
            { name: "verifyingContract", type: "address" },
          ],
        },
      }),
    );
    assert.ok((await pub.getCode({ address: MULTICALL3_ADDRESS }))?.length);
  });

  test("payers hold the minted tokens; payers and facilitators hold ETH", async () => {
    for (const p of payers) assert.equal(await balance(p.address), MINTED);
    // Beside the payers', the confidential vault's operator bond (1,000,000 USDC).
    assert.equal(await read("totalSupply"), MINTED * BigInt(payers.length) + 10n ** 12n);
    for (const k of [...devnet.networks["eip155:8453"]!.facilitatorPrivateKeys]) {
      assert.equal(
        await pub.getBalance({ address: privateKeyToAccount(k).address }),
        parseEther("1000"),
      );
    }
    assert.ok((await pub.getBalance({ address: payers[0]!.address })) > parseEther("999"));
  });

  test("only the owner mints", async () => {
    await assert.rejects(
      call(relayer, "mint", [relayer.address, 1n]),
      /FiatToken: caller is not a minter/,
    );
  });

  test("transferWithAuthorization (v,r,s) moves exactly the value once", async () => {
    const payer = payers[0]!;
    const to: Address = "0x00000000000000000000000000000000000000aa";
    const auth = authorization(payer.address, to, 12_345n);
    const args = [...argsOf(auth), ...vrs(await sign(payer, "TransferWithAuthorization", auth))];
    const before = await balance(payer.address);
    assert.equal(await read("authorizationState", [payer.address, auth.nonce]), false);

    const receipt = await call(relayer, "transferWithAuthorization", args);
    assert.equal(await balance(to), 12_345n);
    assert.equal(await balance(payer.address), before - 12_345n);
    assert.equal(await read("authorizationState", [payer.address, auth.nonce]), true);
    const used = receipt.logs.filter((l) => l.topics[2] === auth.nonce);
    assert.equal(used.length, 1, "AuthorizationUsed emitted");

    await assert.rejects(
      call(relayer, "transferWithAuthorization", args),
      /FiatTokenV2: authorization is used or canceled/,
    );
  });

  test("the bytes-signature overload accepts the same 65-byte signature", async () => {
    const payer = payers[0]!;
    const auth = authorization(payer.address, "0x00000000000000000000000000000000000000ab", 7n);
    const signature = await sign(payer, "TransferWithAuthorization", auth);
    await call(relayer, "transferWithAuthorization", [...argsOf(auth), signature]);
    assert.equal(await balance(auth.to), 7n);
  });

  test("bad signatures and time bounds revert with FiatToken's reasons", async () => {
    const payer = payers[1]!;
    const auth = authorization(payer.address, relayer.address, 1n);
    // Signed by somebody else.
    const forged = await sign(payers[2]!, "TransferWithAuthorization", auth);
    await assert.rejects(
      call(relayer, "transferWithAuthorization", [...argsOf(auth), ...vrs(forged)]),
      /FiatTokenV2: invalid signature/,
    );
    // Signed for another value.
    const other = await sign(payer, "TransferWithAuthorization", { ...auth, value: 2n });
    await assert.rejects(
      call(relayer, "transferWithAuthorization", [...argsOf(auth), other]),
      /FiatTokenV2: invalid signature/,
    );
    // Malformed: Circle's ECRecover rejects instead of recovering garbage.
    const good = await sign(payer, "TransferWithAuthorization", auth);
    const [, r, s] = vrs(good);
    await assert.rejects(
      call(relayer, "transferWithAuthorization", [...argsOf(auth), 29, r, s]),
      /ECRecover: invalid signature 'v' value/,
    );
    await assert.rejects(
      call(relayer, "transferWithAuthorization", [...argsOf(auth), "0x1234"]),
      /ECRecover: invalid signature length/,
    );
    const now = (await pub.getBlock()).timestamp;
    for (const [bounds, reason] of [
      [{ validAfter: now + 3600n }, /FiatTokenV2: authorization is not yet valid/],
      [{ validBefore: now }, /FiatTokenV2: authorization is expired/],
    ] as const) {
      const timed = { ...auth, ...bounds, nonce: randomNonce() };
      const sig = await sign(payer, "TransferWithAuthorization", timed);
      await assert.rejects(
        call(relayer, "transferWithAuthorization", [...argsOf(timed), sig]),
        reason,
      );
    }
    // Too much.
    const rich = { ...auth, value: MINTED + 1n, nonce: randomNonce() };
    await assert.rejects(
      call(relayer, "transferWithAuthorization", [
        ...argsOf(rich),
        await sign(payer, "TransferWithAuthorization", rich),
      ]),
      /ERC20: transfer amount exceeds balance/,
    );
  });

  test("receiveWithAuthorization: only the payee may submit it", async () => {
    const payer = payers[1]!;
    const payee = privateKeyToAccount(devnet.networks["eip155:8453"]!.facilitatorPrivateKeys[2]!);
    const auth = authorization(payer.address, payee.address, 99n);
    const args = [...argsOf(auth), ...vrs(await sign(payer, "ReceiveWithAuthorization", auth))];
    await assert.rejects(
      call(relayer, "receiveWithAuthorization", args),
      /FiatTokenV2: caller must be the payee/,
    );
    const before = await balance(payee.address);
    await call(payee, "receiveWithAuthorization", args);
    assert.equal(await balance(payee.address), before + 99n);
    // A transfer authorization is not a receive authorization.
    const wrongType = authorization(payer.address, payee.address, 1n);
    await assert.rejects(
      call(payee, "receiveWithAuthorization", [
        ...argsOf(wrongType),
        ...vrs(await sign(payer, "TransferWithAuthorization", wrongType)),
      ]),
      /FiatTokenV2: invalid signature/,
    );
  });

  test("cancelAuthorization burns the nonce", async () => {
    const payer = payers[2]!;
    const auth = authorization(payer.address, relayer.address, 5n);
    const cancel = await payer.signTypedData({
      domain: DOMAIN,
      types: CANCEL_TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer: payer.address, nonce: auth.nonce },
    });
    await call(relayer, "cancelAuthorization", [payer.address, auth.nonce, ...vrs(cancel)]);
    assert.equal(await read("authorizationState", [payer.address, auth.nonce]), true);
    await assert.rejects(
      call(relayer, "transferWithAuthorization", [
        ...argsOf(auth),
        await sign(payer, "TransferWithAuthorization", auth),
      ]),
      /FiatTokenV2: authorization is used or canceled/,
    );
  });

  test("EIP-2612 permit sets an allowance that transferFrom spends", async () => {
    const holder = payers[3]!;
    const spender = relayer;
    const nonce = await read<bigint>("nonces", [holder.address]);
    const signature = await holder.signTypedData({
      domain: DOMAIN,
      types: PERMIT_TYPES,
      primaryType: "Permit",
      message: {
        owner: holder.address,
        spender: spender.address,
        value: 777n,
        nonce,
        deadline: FAR_FUTURE,
      },
    });
    await call(spender, "permit", [
      holder.address,
      spender.address,
      777n,
      FAR_FUTURE,
      ...vrs(signature),
    ]);
    assert.equal(await read("allowance", [holder.address, spender.address]), 777n);
    assert.equal(await read("nonces", [holder.address]), nonce + 1n);
    // Replaying the permit fails: the nonce moved on.
    await assert.rejects(
      call(spender, "permit", [holder.address, spender.address, 777n, FAR_FUTURE, signature]),
      /EIP2612: invalid signature/,
    );
    await call(spender, "transferFrom", [holder.address, spender.address, 700n]);
    assert.equal(await read("allowance", [holder.address, spender.address]), 77n);
  });

  test("a contract wallet authorizes through ERC-1271 (bytes overload)", async () => {
    const accepting: Address = "0x0000000000000000000000000000000000001271";
    const rejecting: Address = "0x0000000000000000000000000000000000001272";
    await pub.request({
      method: "anvil_setCode" as never,
      params: [accepting, ERC1271_ACCEPT] as never,
    });
    await pub.request({
      method: "anvil_setCode" as never,
      params: [rejecting, ERC1271_REJECT] as never,
    });
    await call(payers[4]!, "transfer", [accepting, 1_000n]);
    await call(payers[4]!, "transfer", [rejecting, 1_000n]);
    const to: Address = "0x00000000000000000000000000000000000000ac";
    const ok = authorization(accepting, to, 400n);
    await call(relayer, "transferWithAuthorization", [...argsOf(ok), "0xc0ffee"]);
    assert.equal(await balance(to), 400n);
    const refused = authorization(rejecting, to, 400n);
    await assert.rejects(
      call(relayer, "transferWithAuthorization", [...argsOf(refused), "0xc0ffee"]),
      /FiatTokenV2: invalid signature/,
    );
  });

  test("the official @x402/evm client pays and the official facilitator verifies and settles", async () => {
    const payer = payers[4]!;
    const payTo: Address = "0x000000000000000000000000000000000000dEaD";
    const requirements: PaymentRequirements = {
      scheme: "exact",
      network: "eip155:8453",
      asset: USDC,
      amount: "1000",
      payTo,
      maxTimeoutSeconds: 60,
      extra: { name: "USD Coin", version: "2" },
    };
    const client = new ExactEvmClientScheme(toClientEvmSigner(payer, pub));
    const created = await client.createPaymentPayload(2, requirements);
    const payload: PaymentPayload = { ...created, accepted: requirements };

    const viemClient = createWalletClient({
      account: relayer,
      chain,
      transport: http(rpcUrl),
    }).extend(publicActions);
    // The x402 signer port takes loosely typed arguments; viem's are exact.
    const facilitator = new ExactEvmFacilitatorScheme(
      toFacilitatorEvmSigner({
        address: relayer.address,
        readContract: (a) => viemClient.readContract(a as never),
        verifyTypedData: (a) => viemClient.verifyTypedData(a as never),
        writeContract: (a) => viemClient.writeContract(a as never),
        sendTransaction: (a) => viemClient.sendTransaction(a),
        waitForTransactionReceipt: (a) => viemClient.waitForTransactionReceipt(a),
        getCode: (a) => viemClient.getCode(a),
      }),
    );
    const verified = await facilitator.verify(payload, requirements);
    assert.equal(verified.isValid, true, JSON.stringify(verified));
    const before = await balance(payTo);
    const settled = await facilitator.settle(payload, requirements);
    assert.equal(settled.success, true, JSON.stringify(settled));
    assert.equal(await balance(payTo), before + 1000n);
    // The same payload again is a replay.
    const again = await facilitator.verify(payload, requirements);
    assert.equal(again.isValid, false);
  });
});

describe("devnet with interval mining (1 s blocks)", () => {
  test("deploys, and a transfer is mined in a later block", async () => {
    const devnet = await startDevnet({
      blockTimeSeconds: 1,
      payers: 1,
      facilitators: 1,
      outFile: null,
    });
    try {
      const info = devnet.networks["eip155:8453"]!;
      const chain = chainOf(info.rpcUrl);
      const pub = createPublicClient({ chain, transport: http(info.rpcUrl), pollingInterval: 100 });
      const payer = privateKeyToAccount(info.payerPrivateKeys[0]!);
      assert.equal(
        await pub.readContract({
          address: USDC,
          abi: TOKEN_ABI,
          functionName: "balanceOf",
          args: [payer.address],
        }),
        MINTED,
      );
      const start = await pub.getBlockNumber();
      const wallet = createWalletClient({ account: payer, chain, transport: http(info.rpcUrl) });
      const hash = await wallet.writeContract({
        address: USDC,
        abi: TOKEN_ABI,
        functionName: "transfer",
        args: ["0x00000000000000000000000000000000000000bb", 5n],
      });
      const receipt = await pub.waitForTransactionReceipt({ hash, timeout: 10_000 });
      assert.equal(receipt.status, "success");
      assert.ok(receipt.blockNumber > start);
    } finally {
      await devnet.stop();
    }
  });
});
