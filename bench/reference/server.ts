/**
 * The reference facilitator the benchmark compares against: a minimal
 * Express server built the way the official x402 documentation shows —
 * `x402Facilitator` with `ExactEvmScheme` over a plain viem wallet client,
 * default settings, one key.
 *
 *   RPC_URL=… PRIVATE_KEY=0x… PORT=4030 CHAIN_ID=8453 tsx bench/reference/server.ts
 */
import { x402Facilitator } from "@x402/core/facilitator";
import { serveFacilitator } from "./serve.js";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { createWalletClient, defineChain, http, publicActions, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";

const chainId = Number(process.env["CHAIN_ID"] ?? 8453);
const rpcUrl = process.env["RPC_URL"]!;
const chain = defineChain({
  id: chainId,
  name: "devnet",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [rpcUrl] } },
});
const account = privateKeyToAccount(process.env["PRIVATE_KEY"] as Hex);
const client = createWalletClient({ account, chain, transport: http(rpcUrl) }).extend(
  publicActions,
);
const signer = toFacilitatorEvmSigner({
  address: account.address,
  readContract: (args) => client.readContract(args as never),
  verifyTypedData: (args) => client.verifyTypedData(args as never),
  writeContract: (args) => client.writeContract(args as never),
  sendTransaction: (args) => client.sendTransaction(args as never),
  waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args as never) as never,
  getCode: (args) => client.getCode(args),
});

const facilitator = new x402Facilitator().register(`eip155:${chainId}`, new ExactEvmScheme(signer));

serveFacilitator(facilitator, Number(process.env["PORT"] ?? 4030), "reference facilitator");
