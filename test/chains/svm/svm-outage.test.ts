/**
 * A Solana RPC outage is not the payer's fault: the official scheme turns a
 * simulation that could not run into `invalid_exact_svm_transaction_simulation_failed`,
 * and the service must see through it. With the RPC answering 502, verify
 * and settle through the facilitator throw `ChainUnavailableError` (the
 * service's 503), nothing moves, and once it is back the same payment settles.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { PaymentRequirements } from "@x402/core/types";
import { address } from "@solana/kit";
import { getTokenDecoder } from "@solana-program/token";
import {
  associatedTokenAccount,
  startSolanaLedger,
  type RunningSolana,
} from "../../../devnet/svm/index.js";
import type { SolanaLedger } from "../../../devnet/svm/ledger.js";
import type { SvmChainAdapter } from "../../../src/chains/svm/index.js";
import { ChainUnavailableError } from "../../../src/chains/ports.js";
import { assembleFacilitator } from "../../../src/facilitator/assemble.js";
import type { PaymentFacilitator } from "../../../src/facilitator/paymentFacilitator.js";
import { createLogger } from "../../../src/lib/logger.js";
import { startRpcProxy, type RpcProxy } from "../../support/rpcProxy.js";
import { until } from "../../support/processes.js";
import { solanaPaymentRequest } from "../../support/solanaPayments.js";
import { SOLANA_NETWORK as NETWORK, testSvmFamily } from "../../support/svmFamily.js";

describe("a Solana RPC outage", () => {
  let devnet: RunningSolana & { ledger: SolanaLedger };
  let proxy: RpcProxy;
  let family: SvmChainAdapter;
  let facilitator: PaymentFacilitator;

  before(async () => {
    devnet = await startSolanaLedger({ slotMs: 100 });
    proxy = await startRpcProxy(devnet.info.rpcUrl);
    const log = createLogger("silent");
    family = await testSvmFamily({
      rpcUrl: proxy.url,
      secretKeys: devnet.info.facilitatorSecretKeys,
    });
    facilitator = assembleFacilitator(
      [family],
      { builderCode: undefined, builderServiceCode: undefined },
      log,
    );
  });
  after(async () => {
    await family.close();
    await proxy.close();
    await devnet.stop();
  });

  test("verify and settle throw ChainUnavailableError, nothing moves, then the payment settles", async () => {
    const feePayer = facilitator.supported().kinds.find((k) => k.network === NETWORK)!.extra![
      "feePayer"
    ];
    const requirements = {
      scheme: "exact",
      network: NETWORK,
      asset: devnet.info.assets.USDC,
      amount: "900",
      payTo: devnet.info.payTo,
      maxTimeoutSeconds: 60,
      extra: { feePayer },
    } as PaymentRequirements;
    const request = await solanaPaymentRequest(devnet.info, 0, requirements);
    const paid = async () => {
      const acc = devnet.ledger.account(await associatedTokenAccount(address(devnet.info.payTo)));
      return acc.exists ? getTokenDecoder().decode(acc.data).amount : -1n;
    };
    const before = await paid();
    // Warm the token-account lookup, as a running service has it.
    assert.equal((await facilitator.verifyRequest(request)).isValid, true);

    proxy.state.down = true;
    try {
      // Once the family's slot read reaches the RPC, nothing is served from
      // the per-slot verify cache.
      await until("the slot read to reach the RPC", () =>
        family.currentBlock(NETWORK).then(
          () => false,
          () => true,
        ),
      );
      await assert.rejects(facilitator.verifyRequest(request), ChainUnavailableError);
      await assert.rejects(
        facilitator.settle(facilitator.inspect(request), "settlement-1"),
        ChainUnavailableError,
      );
    } finally {
      proxy.state.down = false;
    }
    assert.equal(await paid(), before, "nothing moved during the outage");
    const settled = await facilitator.settle(facilitator.inspect(request), "settlement-2");
    assert.equal(settled.success, true, JSON.stringify(settled));
    assert.equal(await paid(), before + 900n);
  });
});
