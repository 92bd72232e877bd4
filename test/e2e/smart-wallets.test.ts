/**
 * Smart-contract wallets pay, end to end, with the official exact client and
 * `@x402/express` unmodified: a deployed ERC-1271 wallet, and a counterfactual
 * one whose ERC-6492 signature names its factory, which this service calls at
 * settle to deploy it. Factories must be allowed by configuration
 * (EVM_ERC6492_FACTORIES; devnet mode allows the devnet's own).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { paymentMiddleware } from "@x402/express";
import { HTTPFacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { x402Client, x402HTTPClient } from "@x402/core/client";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import type { ClientEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment } from "@x402/fetch";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import {
  createPublicClient,
  encodeFunctionData,
  hashTypedData,
  http,
  parseAbi,
  serializeErc6492Signature,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { DEVNET_WALLET_FACTORY_ADDRESS } from "../../devnet/evm/deploy.js";
import { apiKeyAuth, listenOnLoopback, type Listening } from "../support/resourceServer.js";
import { startStack, type TestStack } from "../support/stack.js";
import { devnetWallet, transferFromDevnetPayer } from "../chains/evm/devnetChain.js";
import { requirementsFor, signPaymentWith, usdcBalance } from "../chains/evm/payments.js";

const NETWORK = "eip155:8453";
const PAY_TO = "0x000000000000000000000000000000000000a11e" as const;
const PRICE = 1_500n;
const FACTORY_ABI = parseAbi([
  "function createAccount(address owner, uint256 salt) returns (address)",
  "function getAddress(address owner, uint256 salt) view returns (address)",
]);

/** A client signer for a wallet owned by `owner`: the owner signs the EIP-712 digest. */
function walletSigner(
  wallet: Address,
  owner: PrivateKeyAccount,
  deployment?: { factory: Address; calldata: Hex },
): ClientEvmSigner {
  return {
    address: wallet,
    async signTypedData(msg) {
      const signature = await owner.sign({
        hash: hashTypedData(msg as Parameters<typeof hashTypedData>[0]),
      });
      return deployment
        ? serializeErc6492Signature({
            address: deployment.factory,
            data: deployment.calldata,
            signature,
          })
        : signature;
    },
  };
}

/** Everything one devnet needs for these payments. */
class WalletWorld {
  readonly publicClient: PublicClient;
  constructor(readonly stack: TestStack) {
    this.publicClient = createPublicClient({ transport: http(stack.rpcUrl) });
  }

  private funderWallet() {
    return devnetWallet(privateKeyToAccount(this.stack.payerKeys[0]!), this.stack.rpcUrl, 8453);
  }

  async predicted(owner: Address, salt: bigint): Promise<Address> {
    return this.publicClient.readContract({
      address: DEVNET_WALLET_FACTORY_ADDRESS,
      abi: FACTORY_ABI,
      functionName: "getAddress",
      args: [owner, salt],
    });
  }

  async deploy(owner: Address, salt: bigint): Promise<void> {
    const hash = await this.funderWallet().writeContract({
      address: DEVNET_WALLET_FACTORY_ADDRESS,
      abi: FACTORY_ABI,
      functionName: "createAccount",
      args: [owner, salt],
    });
    assert.equal((await this.publicClient.waitForTransactionReceipt({ hash })).status, "success");
  }

  fund(address: Address, amount: bigint): Promise<void> {
    return transferFromDevnetPayer(this.stack, this.stack.usdc, address, amount);
  }

  async hasCode(address: Address): Promise<boolean> {
    const code = await this.publicClient.getCode({ address });
    return !!code && code !== "0x";
  }

  balance(address: Address): Promise<bigint> {
    return usdcBalance(this.stack.rpcUrl, this.stack.usdc, address);
  }

  facilitator(): HTTPFacilitatorClient {
    return new HTTPFacilitatorClient({
      url: this.stack.url,
      createAuthHeaders: apiKeyAuth(this.stack.apiKey),
    });
  }

  /** A payment signed by `signer` for this devnet's USDC, ready for /verify and /settle. */
  async payment(
    signer: ClientEvmSigner,
  ): Promise<{ payload: PaymentPayload; requirements: PaymentRequirements }> {
    const requirements = requirementsFor({
      network: NETWORK,
      usdc: this.stack.usdc,
      payTo: PAY_TO,
      amount: PRICE.toString(),
    });
    return { requirements, payload: await signPaymentWith(signer, requirements) };
  }
}

describe("smart-contract wallets pay (factory allowed)", () => {
  let world: WalletWorld;
  let server: Listening | undefined;
  let resourceUrl: string;

  before(async () => {
    // Devnet mode allows the devnet factory with no configuration.
    world = new WalletWorld(await startStack({ networks: [NETWORK] }));
    const resourceServer = new x402ResourceServer(world.facilitator()).register(
      NETWORK,
      new ExactEvmServerScheme(),
    );
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /paid": {
            accepts: { scheme: "exact", network: NETWORK, payTo: PAY_TO, price: "$0.0015" },
            description: "Paid by smart wallets",
            mimeType: "application/json",
          },
        },
        resourceServer,
      ),
    );
    app.get("/paid", (_req, res) => res.json({ ok: true }));
    server = await listenOnLoopback(app);
    resourceUrl = `${server.origin}/paid`;
  });

  after(async () => {
    await server?.close();
    await world?.stack.stop();
  });

  async function payThroughResource(signer: ClientEvmSigner): Promise<string> {
    const client = new x402Client().register("eip155:*", new ExactEvmClientScheme(signer));
    const res = await wrapFetchWithPayment(fetch, client)(resourceUrl);
    assert.equal(res.status, 200, await res.clone().text());
    const receipt = new x402HTTPClient(client).getPaymentSettleResponse((n) => res.headers.get(n));
    assert.equal(receipt.success, true);
    return receipt.transaction;
  }

  test("a deployed ERC-1271 wallet pays: 402 → 200, the wallet's USDC moves", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const wallet = await world.predicted(owner.address, 1n);
    await world.deploy(owner.address, 1n);
    await world.fund(wallet, 10_000n);
    const payToBefore = await world.balance(PAY_TO);

    const transaction = await payThroughResource(walletSigner(wallet, owner));

    assert.equal(await world.balance(wallet), 10_000n - PRICE);
    assert.equal(await world.balance(PAY_TO), payToBefore + PRICE);
    const row = await world.stack.service.db
      .selectFrom("settlements")
      .selectAll()
      .where("transaction", "=", transaction)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, "succeeded");
    assert.equal(row.payer, wallet.toLowerCase());
  });

  test("a counterfactual wallet pays with ERC-6492: deployed through its factory at settle", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const wallet = await world.predicted(owner.address, 7n);
    await world.fund(wallet, 10_000n);
    assert.equal(await world.hasCode(wallet), false, "not deployed yet");
    const payToBefore = await world.balance(PAY_TO);

    await payThroughResource(
      walletSigner(wallet, owner, {
        factory: DEVNET_WALLET_FACTORY_ADDRESS,
        calldata: encodeFunctionData({
          abi: FACTORY_ABI,
          functionName: "createAccount",
          args: [owner.address, 7n],
        }),
      }),
    );

    assert.equal(await world.hasCode(wallet), true, "the service deployed the wallet");
    assert.equal(await world.balance(wallet), 10_000n - PRICE);
    assert.equal(await world.balance(PAY_TO), payToBefore + PRICE);
  });

  test("a deployed wallet with a signature from someone else is refused; nothing moves", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const stranger = privateKeyToAccount(generatePrivateKey());
    const wallet = await world.predicted(owner.address, 3n);
    await world.deploy(owner.address, 3n);
    await world.fund(wallet, 10_000n);
    const { payload, requirements } = await world.payment(walletSigner(wallet, stranger));
    const facilitator = world.facilitator();
    const verdict = await facilitator.verify(payload, requirements);
    assert.equal(verdict.isValid, false);
    assert.match(verdict.invalidReason ?? "", /signature/i, JSON.stringify(verdict));
    const settled = await facilitator.settle(payload, requirements).catch((e: unknown) => e);
    assert.equal((settled as { success?: boolean }).success ?? false, false);
    assert.equal(await world.balance(wallet), 10_000n);
  });
});

describe("smart-contract wallets: a factory that is not allowed", () => {
  let world: WalletWorld;
  before(async () => {
    world = new WalletWorld(
      await startStack({
        networks: [NETWORK],
        // Some other factory is allowed; the devnet's is not.
        env: { EVM_ERC6492_FACTORIES: "0x0000000000000000000000000000000000000fac" },
      }),
    );
  });
  after(async () => {
    await world?.stack.stop();
  });

  test("a counterfactual payment naming it is invalid with a clear reason; nothing is deployed or moved", async () => {
    const owner = privateKeyToAccount(generatePrivateKey());
    const wallet = await world.predicted(owner.address, 9n);
    await world.fund(wallet, 10_000n);
    const { payload, requirements } = await world.payment(
      walletSigner(wallet, owner, {
        factory: DEVNET_WALLET_FACTORY_ADDRESS,
        calldata: encodeFunctionData({
          abi: FACTORY_ABI,
          functionName: "createAccount",
          args: [owner.address, 9n],
        }),
      }),
    );
    const facilitator = world.facilitator();
    const verdict = await facilitator.verify(payload, requirements);
    assert.equal(verdict.isValid, false);
    assert.match(verdict.invalidReason ?? "", /factory/i, JSON.stringify(verdict));
    const settled = await facilitator.settle(payload, requirements).catch((e: unknown) => e);
    assert.equal((settled as { success?: boolean }).success ?? false, false);
    assert.equal(await world.hasCode(wallet), false, "no wallet was deployed");
    assert.equal(await world.balance(wallet), 10_000n, "nothing moved");
  });
});
