/**
 * What `erc20ApprovalGasSponsoring` refuses before anything is sent, one
 * reason per fault, against a stub chain (the relay itself runs end to end
 * in test/e2e/erc20-approval-sponsoring.test.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { PERMIT2_ADDRESS } from "@x402/evm";
import { encodeFunctionData, erc20Abi, maxUint256, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { noopJournal, unrecordedFundings } from "../../ports.js";
import { ApprovalSponsor } from "./approvalSponsor.js";
import { ERC20_APPROVAL_KEY } from "./approveRules.js";

const CHAIN_ID = 4663;
const TOKEN = "0xe343167631d89B6Ffc58B88d6b7fB0228795491D" as const;
const OTHER = "0x000000000000000000000000000000000000dEaD" as const;
const payer = privateKeyToAccount(generatePrivateKey());
const stranger = privateKeyToAccount(generatePrivateKey());
const GWEI = 1_000_000_000n;

const requirements: PaymentRequirements = {
  scheme: "exact",
  network: `eip155:${CHAIN_ID}`,
  asset: TOKEN,
  amount: "3000",
  payTo: OTHER,
  maxTimeoutSeconds: 60,
  extra: { assetTransferMethod: "permit2" },
};

/**
 * A chain where the payer's next nonce is 0, Permit2 holds `allowance`, the
 * payer holds `balance` of the token (enough by default) and the base fee is 1 gwei.
 */
function sponsor(
  chain: {
    allowance?: bigint;
    nonce?: number;
    balance?: bigint;
    /** The payer's native balance (default 0: its approve's gas is funded). */
    eth?: bigint;
    code?: Hex;
    fundedBefore?: boolean;
  } = {},
) {
  return new ApprovalSponsor({
    network: requirements.network,
    chainId: CHAIN_ID,
    client: {
      getTransactionCount: async () => chain.nonce ?? 0,
      readContract: async ({ functionName }: { functionName: string }) =>
        functionName === "balanceOf" ? (chain.balance ?? 1_000_000n) : (chain.allowance ?? 0n),
      getBalance: async () => chain.eth ?? 0n,
      getCode: async () => chain.code,
      // What a first approve of a plain ERC-20 costs.
      estimateGas: async () => 46_000n,
    } as never,
    pool: { addresses: [] } as never,
    signer: {} as never,
    fees: {
      forNewTransaction: async () => ({ maxFeePerGas: 3n * GWEI, maxPriorityFeePerGas: GWEI }),
      baseFee: async () => GWEI,
    } as never,
    journal: noopJournal,
    fundings: {
      ...unrecordedFundings,
      refusal: async () =>
        chain.fundedBefore ? { kind: "already_funded" as const, message: "" } : undefined,
    },
    opStack: false,
    maxGasPerTransaction: 3_000_000n,
    confirmationTimeoutMs: 1_000,
  });
}

interface ApproveTx {
  by?: typeof payer;
  chainId?: number | undefined;
  to?: Hex;
  spender?: Hex;
  amount?: bigint;
  nonce?: number;
  gas?: bigint;
  maxFeePerGas?: bigint;
  tip?: bigint;
  value?: bigint;
  legacy?: boolean;
}

async function signedApprove(tx: ApproveTx = {}): Promise<Hex> {
  const data = encodeFunctionData({
    abi: erc20Abi,
    functionName: "approve",
    args: [tx.spender ?? PERMIT2_ADDRESS, tx.amount ?? maxUint256],
  });
  const common = {
    to: tx.to ?? TOKEN,
    data,
    nonce: tx.nonce ?? 0,
    gas: tx.gas ?? 70_000n,
    ...(tx.value ? { value: tx.value } : {}),
  };
  const by = tx.by ?? payer;
  if (tx.legacy) {
    return by.signTransaction({
      ...common,
      type: "legacy",
      gasPrice: 2n * GWEI,
      ...(tx.chainId === undefined ? {} : { chainId: tx.chainId }),
    });
  }
  return by.signTransaction({
    ...common,
    type: "eip1559",
    chainId: "chainId" in tx ? tx.chainId! : CHAIN_ID,
    maxFeePerGas: tx.maxFeePerGas ?? 2n * GWEI,
    maxPriorityFeePerGas: tx.tip ?? ((tx.maxFeePerGas ?? 2n * GWEI) < GWEI ? 0n : GWEI),
  });
}

async function payment(
  tx: ApproveTx = {},
  info: Record<string, unknown> = {},
): Promise<PaymentPayload> {
  return {
    x402Version: 2,
    accepted: requirements,
    payload: {
      signature: "0x00",
      permit2Authorization: {
        from: payer.address,
        permitted: { token: TOKEN, amount: "3000" },
        spender: OTHER,
        nonce: "1",
        deadline: "9999999999",
        witness: { to: OTHER, validAfter: "0" },
      },
    },
    extensions: {
      [ERC20_APPROVAL_KEY]: {
        info: {
          from: payer.address,
          asset: TOKEN,
          spender: PERMIT2_ADDRESS,
          amount: (tx.amount ?? maxUint256).toString(),
          signedTransaction: await signedApprove(tx),
          version: "1",
          ...info,
        },
      },
    },
  } as PaymentPayload;
}

const reasonOf = async (p: PaymentPayload, s = sponsor()) => {
  const out = await s.check(p, requirements);
  return out.ok ? "ok" : out.reason;
};

test("an approve the payer's client signs passes; a payment carrying none, or only the declaration, is not checked", async () => {
  assert.equal(await reasonOf(await payment()), "ok");
  assert.equal(await reasonOf(await payment({ amount: 3000n })), "ok");
  const declarationOnly = {
    ...(await payment()),
    extensions: { [ERC20_APPROVAL_KEY]: { info: { description: "…", version: "1" } } },
  } as PaymentPayload;
  assert.equal(await reasonOf(declarationOnly), "ok");
  const none = { ...(await payment()), extensions: {} } as PaymentPayload;
  assert.equal(await reasonOf(none), "ok");
});

test("each fault of the signed approve has its own reason", async () => {
  const cases: [string, PaymentPayload][] = [
    ["invalid_erc20_approval_extension_format", await payment({}, { from: "nobody" })],
    ["erc20_approval_from_mismatch", await payment({}, { from: stranger.address })],
    ["erc20_approval_asset_mismatch", await payment({}, { asset: OTHER })],
    ["erc20_approval_spender_not_permit2", await payment({}, { spender: OTHER })],
    ["erc20_approval_tx_parse_failed", await payment({}, { signedTransaction: "0x1234" })],
    ["erc20_approval_tx_wrong_chain", await payment({ chainId: 1 })],
    ["erc20_approval_tx_wrong_chain", await payment({ legacy: true })],
    ["erc20_approval_tx_wrong_target", await payment({ to: OTHER })],
    ["erc20_approval_tx_wrong_spender", await payment({ spender: OTHER })],
    ["erc20_approval_tx_signer_mismatch", await payment({ by: stranger })],
    ["erc20_approval_tx_sends_value", await payment({ value: 1n })],
    ["erc20_approval_amount_insufficient", await payment({ amount: 2999n })],
    ["erc20_approval_amount_insufficient", await payment({}, { amount: "5" })],
    ["erc20_approval_tx_gas_too_high", await payment({ gas: 3_000_001n })],
    // Far below the per-transaction ceiling, far above what an approve costs.
    ["erc20_approval_tx_gas_too_high", await payment({ gas: 100_001n })],
    ["erc20_approval_tx_gas_too_high", await payment({ gas: 80_000n })],
    ["erc20_approval_tx_nonce_mismatch", await payment({ nonce: 1 })],
    ["erc20_approval_tx_fee_too_high", await payment({ maxFeePerGas: 3n * GWEI + 1n })],
    ["erc20_approval_tx_fee_too_low", await payment({ maxFeePerGas: GWEI - 1n })],
  ];
  for (const [reason, p] of cases) assert.equal(await reasonOf(p), reason, reason);
  // A legacy transaction with its EIP-155 chain id is an approve like any other.
  assert.equal(await reasonOf(await payment({ legacy: true, chainId: CHAIN_ID })), "ok");
});

test("a payer short of gas is funded only for a plain account, an approve's honest gas, and a funding at most 40% above its cost", async () => {
  // 70,000 gas (the official client's) at 2 gwei with a 1 gwei tip over a
  // 1 gwei base fee: 140,000 gwei up front for 92,000 of cost (34% left over).
  assert.equal(await reasonOf(await payment()), "ok");
  const delegated = sponsor({ code: `0xef0100${"ab".repeat(20)}` });
  assert.equal(await reasonOf(await payment(), delegated), "erc20_approval_payer_has_code");
  assert.equal(
    await reasonOf(await payment(), sponsor({ code: "0x6080" })),
    "erc20_approval_payer_has_code",
  );
  assert.equal(await reasonOf(await payment({ gas: 45_999n })), "erc20_approval_tx_gas_too_low");
  // 160% of the 46,000 the approve needs is 73,600.
  assert.equal(await reasonOf(await payment({ gas: 73_601n })), "erc20_approval_tx_gas_too_high");
  // Twice the base fee and a small tip: the payer would keep 62% of the funding.
  assert.equal(
    await reasonOf(await payment({ maxFeePerGas: 2n * GWEI, tip: GWEI / 10n })),
    "erc20_approval_tx_overpriced",
  );
  assert.equal(
    await reasonOf(await payment(), sponsor({ fundedBefore: true })),
    "erc20_approval_payer_already_funded",
  );
  // A payer holding the approve's gas is funded nothing, so none of this applies.
  const holds = sponsor({ eth: 70_000n * 2n * GWEI, code: `0xef0100${"ab".repeat(20)}` });
  assert.equal(
    await reasonOf(await payment({ maxFeePerGas: 2n * GWEI, tip: GWEI / 10n }), holds),
    "ok",
  );
});

test("when Permit2 already holds enough, the approve will not be sent, so its nonce and fee do not matter", async () => {
  const allowed = sponsor({ allowance: 3000n });
  assert.equal(await reasonOf(await payment({ nonce: 7 }), allowed), "ok");
  assert.equal(
    await reasonOf(await payment({ nonce: 7 }), sponsor({ allowance: 2999n })),
    "erc20_approval_tx_nonce_mismatch",
  );
});

test("an approve for a payer without the tokens the payment moves is not funded", async () => {
  assert.equal(await reasonOf(await payment(), sponsor({ balance: 2999n })), "insufficient_funds");
  assert.equal(await reasonOf(await payment(), sponsor({ balance: 3000n })), "ok");
});
