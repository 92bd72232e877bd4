/**
 * EVM `exact` with EIP-3009 USDC on eip155:8453, paid with the official
 * `@x402/evm` client scheme. An EIP-3009 nonce is the payer's choice, so a
 * second authorization can carry one already consumed.
 */
import { x402Client } from "@x402/core/client";
import type { PaymentRequirements } from "@x402/core/types";
import { authorizationTypes } from "@x402/evm";
import { ExactEvmScheme as ExactEvmClientScheme } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";
import { createPublicClient, decodeEventLog, erc20Abi, getAddress, http, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { usdcBalance } from "../chains/evm/payments.js";
import { assembled, usdcPrice, type FamilyAdapter, type MalformedPayload } from "./adapter.js";

const NETWORK = "eip155:8453";

// An address no other test pays, so its balance moves only with this suite.
const PAY_TO = "0x00000000000000000000000000000000000d0e11";

const payerAccount = (stack: { payerKeys: Hex[] }, i: number) =>
  privateKeyToAccount(stack.payerKeys[i]!);

export const evm: FamilyAdapter<"eip155"> = {
  name: "EVM EIP-3009",
  network: NETWORK,
  namespace: "eip155",
  stack: { networks: [NETWORK] },
  sendCall: "eth_sendRawTransaction",
  reasons: {
    replay: "invalid_exact_evm_nonce_already_used",
    amount: "invalid_exact_evm_payload_authorization_value_mismatch",
    payTo: "invalid_exact_evm_recipient_mismatch",
  },
  unlistedAsset: "0x000000000000000000000000000000000000dEaD",
  malformedPayloads: malformedAuthorizations(),
  registerServer: (server) => server.register(NETWORK, new ExactEvmServerScheme()),
  payTo: () => PAY_TO,
  price: usdcPrice,
  client: async (stack, i) =>
    new x402Client().register("eip155:*", new ExactEvmClientScheme(payerAccount(stack, i))),
  payer: async (stack, i) => payerAccount(stack, i).address,
  balanceOf: (stack, address) => usdcBalance(stack.rpcUrl, stack.usdc, address as Hex),
  // Its receipt in a block of the canonical chain (anvil can reorg), and its ERC-20 Transfer logs.
  async transfersOf(stack, hash) {
    const client = createPublicClient({ transport: http(stack.rpcUrl) });
    const receipt = await client
      .getTransactionReceipt({ hash: hash as Hex })
      .catch(() => undefined);
    if (!receipt) return undefined;
    const block = await client.getBlock({ blockNumber: receipt.blockNumber });
    if (block.hash !== receipt.blockHash) return undefined;
    if (receipt.status !== "success") return { failure: "the transaction reverted" };
    return {
      transfers: receipt.logs.flatMap((log) => {
        try {
          const ev = decodeEventLog({ abi: erc20Abi, data: log.data, topics: log.topics });
          if (ev.eventName !== "Transfer") return [];
          return [
            { from: ev.args.from, to: ev.args.to, asset: log.address, amount: ev.args.value },
          ];
        } catch {
          return [];
        }
      }),
    };
  },
  async signReusingNonce(stack, i, first, requirements) {
    const used = (first.payload as { authorization: { nonce: Hex; validBefore: string } })
      .authorization;
    const account = payerAccount(stack, i);
    const authorization = {
      from: account.address,
      to: getAddress(requirements.payTo),
      value: requirements.amount,
      validAfter: "0",
      validBefore: used.validBefore,
      nonce: used.nonce,
    };
    const signature = await account.signTypedData({
      domain: domainOf(requirements),
      types: authorizationTypes,
      primaryType: "TransferWithAuthorization",
      message: {
        ...authorization,
        value: BigInt(authorization.value),
        validAfter: 0n,
        validBefore: BigInt(authorization.validBefore),
      },
    });
    return assembled(first, requirements, { authorization, signature });
  },
};

/** An EIP-3009 payload missing its signature, with a number for the value, not hex, oversized. */
function malformedAuthorizations(): MalformedPayload[] {
  const field = (path: string) => `paymentPayload.payload.${path}`;
  const withAuthorization =
    (changes: Record<string, unknown>) =>
    ({ authorization, ...rest }: Record<string, unknown>) => ({
      ...rest,
      authorization: { ...(authorization as object), ...changes },
    });
  return [
    {
      what: "signature missing",
      field: field("signature"),
      spoil: ({ signature: _, ...rest }) => rest,
    },
    {
      what: "authorization.value a number",
      field: field("authorization.value"),
      spoil: withAuthorization({ value: 1232 }),
    },
    {
      what: "signature not hex",
      field: field("signature"),
      spoil: (valid) => ({ ...valid, signature: "0x%%not hex%%" }),
    },
    {
      what: "authorization.nonce of 33 bytes",
      field: field("authorization.nonce"),
      spoil: withAuthorization({ nonce: `0x${"ab".repeat(33)}` }),
    },
  ];
}

function domainOf(requirements: PaymentRequirements) {
  const extra = requirements.extra as { name: string; version: string };
  return {
    name: extra.name,
    version: extra.version,
    chainId: Number(requirements.network.split(":")[1]),
    verifyingContract: getAddress(requirements.asset),
  };
}
