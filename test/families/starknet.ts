/**
 * Starknet `exact` with USDC, paid with this project's Starknet client
 * scheme (no official one is published). A SNIP-9 outside execution carries
 * a nonce of the payer's choice, so a second one can carry a nonce already
 * consumed.
 */
import { x402Client } from "@x402/core/client";
import { Account, RpcProvider, stark } from "starknet";
import { STARKNET_MAINNET } from "../../devnet/starknet/index.js";
import { TRANSFER_EVENT_KEY } from "../../devnet/starknet/ledger.js";
import { STARKNET_STRK, STARKNET_USDC } from "../../src/chains/starknet/networks.js";
import {
  ExactStarknetClientScheme,
  outsideExecutionFor,
} from "../../src/chains/starknet/clients/exactClient.js";
import { ExactStarknetServerScheme } from "../../src/chains/starknet/clients/exactServer.js";
import type { TestStack } from "../support/stack.js";
import {
  SendWatch,
  assembled,
  usdcPrice,
  type FamilyAdapter,
  type MalformedPayload,
} from "./adapter.js";

const account = (stack: TestStack, i: number) => {
  const payer = stack.families.starknet!.info.payers[i]!;
  return new Account({
    provider: new RpcProvider({ nodeUrl: stack.families.starknet!.info.rpcUrl }),
    address: payer.address,
    signer: payer.privateKey,
    cairoVersion: "1",
  });
};

export const starknet: FamilyAdapter<"starknet"> = {
  name: "Starknet",
  network: STARKNET_MAINNET,
  namespace: "starknet",
  stack: { families: { starknet: {} } },
  sendCall: "starknet_addInvokeTransaction",
  reasons: {
    replay: "invalid_exact_starknet_nonce_already_used",
    amount: "invalid_exact_starknet_payload_amount_mismatch",
    payTo: "invalid_exact_starknet_payload_recipient_mismatch",
  },
  // STRK, the fee token: real, and not an asset the service settles.
  unlistedAsset: STARKNET_STRK,
  malformedPayloads: malformedOutsideExecutions(),
  registerServer: (server) => server.register(STARKNET_MAINNET, new ExactStarknetServerScheme()),
  payTo: (stack) => stack.families.starknet!.info.payTo,
  price: usdcPrice,
  client: async (stack, i) =>
    new x402Client().register("starknet:*", new ExactStarknetClientScheme(account(stack, i))),
  // The service writes a Starknet address as 64 hex digits.
  payer: async (stack, i) =>
    `0x${BigInt(stack.families.starknet!.info.payers[i]!.address).toString(16).padStart(64, "0")}`,
  balanceOf: async (stack, address) =>
    stack.families.starknet!.ledger.balanceOf(STARKNET_USDC, address),
  // Its ERC-20 `Transfer` events: keys [selector, from, to], data [low, high].
  async transfersOf(stack, hash) {
    const record = stack.families.starknet!.ledger.transaction(hash);
    if (!record) return undefined;
    if (record.execution !== "SUCCEEDED") {
      return { failure: `the transaction ${record.execution ?? "is not executed"}` };
    }
    if (record.blockNumber === undefined) return { failure: "not in a block" };
    return {
      transfers: record.events.flatMap((e) =>
        BigInt(e.keys[0] ?? 0) === BigInt(TRANSFER_EVENT_KEY) && e.keys.length >= 3
          ? [
              {
                from: e.keys[1]!,
                to: e.keys[2]!,
                asset: e.from_address,
                amount: BigInt(e.data[0] ?? 0) + (BigInt(e.data[1] ?? 0) << 128n),
              },
            ]
          : [],
      ),
    };
  },
  async signReusingNonce(stack, i, first, requirements) {
    const signed = first.payload as {
      outsideExecution: { typedData: { message: Record<string, unknown> } };
    };
    const nonce = String(signed.outsideExecution.typedData.message["Nonce"]);
    const payer = account(stack, i);
    if (!stack.families.starknet!.ledger.outsideNonceUsed(payer.address, nonce)) {
      throw new Error("the first payment's nonce is not spent on the ledger");
    }
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
  payerRace: {
    signers: "executors",
    unit: "FRI",
    reason: "insufficient_funds",
    feeKnownBeforeSending: false,
    lostBeyondFee: 0n,
    // Room for one transaction in flight at its worst fee (the simulation's
    // resource bounds: about 0.0153 STRK on the ledger), not for one more
    // once a revert has cost its fee (about 0.0044 STRK).
    budget: { env: { STARKNET_FAILED_FEE_BUDGET_STRK: "0.017" }, native: 0.017 },
    watchSends(stack) {
      const watch = new SendWatch();
      const ledger = stack.families.starknet!.ledger;
      const addInvoke = ledger.addInvoke.bind(ledger);
      ledger.addInvoke = (tx) =>
        watch.take(
          () => addInvoke(tx),
          (hash) => hash,
        );
      return watch;
    },
    signersBalance: async (stack) => {
      const running = stack.families.starknet!;
      return running.info.executors.reduce(
        (sum, executor) => sum + running.ledger.balanceOf(STARKNET_STRK, executor),
        0n,
      );
    },
    // Played by taking its USDC just before the ledger takes ours (it runs at the next block).
    async funds(stack, i) {
      const ledger = stack.families.starknet!.ledger;
      const owner = await starknet.payer(stack, i);
      const held = await starknet.balanceOf(stack, owner);
      return {
        take: () => ledger.burn(STARKNET_USDC, owner, held),
        giveBack: () => ledger.mint(STARKNET_USDC, owner, held),
      };
    },
  },
};

/** An outside execution missing, its signature a string, `from` not hex, too many signature felts. */
function malformedOutsideExecutions(): MalformedPayload[] {
  const field = (path: string) => `paymentPayload.payload.${path}`;
  const withSignature =
    (signature: unknown) =>
    ({ outsideExecution, ...rest }: Record<string, unknown>) => ({
      ...rest,
      outsideExecution: { ...(outsideExecution as object), signature },
    });
  return [
    {
      what: "outsideExecution missing",
      field: field("outsideExecution"),
      spoil: ({ outsideExecution: _, ...rest }) => rest,
    },
    {
      what: "outsideExecution.signature a string",
      field: field("outsideExecution.signature"),
      spoil: withSignature("0x1"),
    },
    {
      what: "from not hex",
      field: field("from"),
      spoil: (valid) => ({ ...valid, from: "0x%%not hex%%" }),
    },
    {
      what: "outsideExecution.signature of 33 felts",
      field: field("outsideExecution.signature"),
      spoil: withSignature(Array.from({ length: 33 }, () => "0x1")),
    },
  ];
}
