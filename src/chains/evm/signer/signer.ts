/**
 * The facilitator's EVM signer for one network: the port that `@x402/evm`
 * mechanisms call to read the chain, check signatures and send transactions.
 * Reads go to the public client; writes go through the signer pool.
 */
import type { FacilitatorEvmSigner } from "@x402/evm";
import { concatHex, encodeFunctionData, type Hex, type PublicClient } from "viem";
import { Reason } from "../../../protocol/reasons.js";
import { GasLimitTooHighError, GasPriceTooHighError } from "../rpc/feeOracle.js";
import { EvmReason } from "../reasons.js";
import { currentSettlement } from "../../settlementScope.js";
import { NoHealthySignerError, SignerUnavailableError, type EvmSignerPool } from "./signerPool.js";
import { pinnedSender } from "./pinnedSender.js";
import { CodeCache } from "../rpc/codeCache.js";
import { PayerCodeReader, type PayerCode } from "./payerCode.js";
import type { FeeOracle } from "../rpc/feeOracle.js";
import { simulationClient } from "../rpc/simulationClient.js";
import { WALLET_DEPLOY_GAS_CEILING } from "../payment/gasCeilings.js";
import { FailedFeeBudgetSpentError, noteBudgetRefusal } from "../../failedFeeBudget.js";

export interface EvmSignerOptions {
  publicClient: PublicClient;
  /** The fees our transactions pay: every simulation runs with them (simulationClient.ts). */
  fees: FeeOracle;
  pool: EvmSignerPool;
  /** Bound on every receipt wait; past it the mechanism reports `settlement_pending`. */
  confirmationTimeoutMs: number;
  /** Wallet implementations whose signature check gets the allowance from a first payment (payerCode.ts). */
  knownWalletImplementations?: readonly string[];
}

/** Records why the pool refused, so the settle answer names it. */
export async function refusingClearly<T>(send: () => Promise<T>): Promise<T> {
  try {
    return await send();
  } catch (e) {
    const scope = currentSettlement()?.notes;
    if (scope && e instanceof GasPriceTooHighError) {
      scope.refusal = { reason: Reason.gasPriceTooHigh, message: e.message };
    } else if (e instanceof FailedFeeBudgetSpentError) {
      noteBudgetRefusal(e);
    } else if (scope && e instanceof GasLimitTooHighError) {
      scope.refusal = { reason: EvmReason.gasLimitTooHigh, message: e.message };
    } else if (
      scope &&
      (e instanceof NoHealthySignerError || e instanceof SignerUnavailableError)
    ) {
      scope.refusal = { reason: Reason.noSignerAvailable, message: e.message };
    }
    throw e;
  }
}

export function createEvmSigner(opts: EvmSignerOptions): FacilitatorEvmSigner {
  const pool = opts.pool;
  const codes = new CodeCache(opts.publicClient);
  const payerCodes = new PayerCodeReader(
    opts.publicClient,
    codes,
    opts.knownWalletImplementations ?? [],
  );
  /** What the current settlement's payer carries, for the pool's ceiling and budget tier. */
  const payerCode = async (): Promise<{ payerCode?: PayerCode }> => {
    const scope = currentSettlement();
    if (!scope?.payer) return {};
    return { payerCode: await payerCodes.of(scope.payer, scope.payerKnown) };
  };
  // Reads that decide a payment simulate as our transaction would run.
  const pc = simulationClient(
    opts.publicClient,
    () => pool.addresses[0],
    () => opts.fees.current(),
  );
  return {
    getAddresses: () => pool.addresses,
    readContract: (args) => {
      // A simulation of a call only one account may make runs as that account.
      const from = pinnedSender(args.address, args.functionName, args.args);
      return pc.readContract({
        address: args.address,
        abi: args.abi as never,
        functionName: args.functionName as never,
        args: (args.args ?? []) as never,
        ...(from ? { account: from } : {}),
      }) as Promise<unknown>;
    },
    // Part of the signer port; the mechanisms recover EOA signatures through
    // viem directly (made native by viemNativeRecovery.ts), so this is only
    // reached for what needs the chain (ERC-1271/6492 wallets).
    verifyTypedData: (args) =>
      pc.verifyTypedData({
        address: args.address,
        domain: args.domain as never,
        types: args.types as never,
        primaryType: args.primaryType as never,
        message: args.message as never,
        signature: args.signature,
      }),
    writeContract: (args) => {
      const data = encodeFunctionData({
        abi: args.abi,
        functionName: args.functionName,
        args: args.args,
      } as Parameters<typeof encodeFunctionData>[0]);
      const from = pinnedSender(args.address, args.functionName, args.args);
      return refusingClearly(async () =>
        pool.send({
          to: args.address,
          data: args.dataSuffix ? concatHex([data, args.dataSuffix]) : data,
          ...(args.gas !== undefined ? { gas: args.gas } : {}),
          ...(from ? { from } : {}),
          ...(await payerCode()),
        }),
      );
    },
    // The mechanisms send a bare transaction only to deploy a counterfactual
    // (ERC-6492) wallet through an allowed factory.
    sendTransaction: (args) =>
      refusingClearly(() =>
        pool.send({ to: args.to, data: args.data, ceiling: WALLET_DEPLOY_GAS_CEILING }),
      ),
    waitForTransactionReceipt: async (args) => {
      const r = await pool.waitForReceipt(
        args.hash as Hex,
        args.timeout ?? opts.confirmationTimeoutMs,
      );
      return { status: r.status, logs: r.logs };
    },
    getCode: (args) => codes.get(args.address),
  };
}
