/**
 * Starknet `exact` with USDC, paid with this project's Starknet client
 * scheme (no official one is published). A SNIP-9 outside execution carries
 * a nonce of the payer's choice, so a second one can carry a nonce already
 * consumed.
 */
import { x402Client } from "@x402/core/client";
import { Account, RpcProvider, stark } from "starknet";
import { STARKNET_MAINNET } from "../../devnet/starknet/index.js";
import { STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import {
  ExactStarknetClientScheme,
  outsideExecutionFor,
} from "../../src/chains/starknet/clients/exactClient.js";
import { ExactStarknetServerScheme } from "../../src/chains/starknet/clients/exactServer.js";
import type { TestStack } from "../support/stack.js";
import { assembled, usdcPrice, type FamilyAdapter } from "./adapter.js";

const account = (stack: TestStack, i: number) => {
  const payer = stack.starknet!.info.payers[i]!;
  return new Account({
    provider: new RpcProvider({ nodeUrl: stack.starknet!.info.rpcUrl }),
    address: payer.address,
    signer: payer.privateKey,
    cairoVersion: "1",
  });
};

export const starknet: FamilyAdapter = {
  name: "Starknet",
  network: STARKNET_MAINNET,
  stack: { starknet: true },
  replayReason: "invalid_exact_starknet_nonce_already_used",
  registerServer: (server) => server.register(STARKNET_MAINNET, new ExactStarknetServerScheme()),
  payTo: (stack) => stack.starknet!.info.payTo,
  price: usdcPrice,
  client: async (stack, i) =>
    new x402Client().register("starknet:*", new ExactStarknetClientScheme(account(stack, i))),
  // The service writes a Starknet address as 64 hex digits.
  payer: async (stack, i) =>
    `0x${BigInt(stack.starknet!.info.payers[i]!.address).toString(16).padStart(64, "0")}`,
  balanceOf: async (stack, address) => stack.starknet!.ledger.balanceOf(STARKNET_USDC, address),
  async signReusingNonce(stack, i, first, requirements) {
    const signed = first.payload as {
      outsideExecution: { typedData: { message: Record<string, unknown> } };
    };
    const nonce = String(signed.outsideExecution.typedData.message["Nonce"]);
    const payer = account(stack, i);
    const typedData = outsideExecutionFor(payer.address, requirements, {
      nonce,
      nowSeconds: Math.floor(Date.now() / 1000),
    });
    const signature = stark.formatSignature(await payer.signMessage(typedData));
    return assembled(first, requirements, {
      from: payer.address,
      outsideExecution: { typedData, signature },
    });
  },
};
