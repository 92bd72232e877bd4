/**
 * The rippled engine results this ledger gives, with their codes and
 * messages as rippled reports them. Prefixes mean what they mean on the XRP
 * Ledger: `tes` applied; `tec` applied, only the fee claimed; `tef`/`tem`/
 * `tel` refused and never included; `ter` refused for now (may succeed later).
 */
const ENGINE_RESULTS = {
  tesSUCCESS: [0, "The transaction was applied. Only final in a validated ledger."],
  tecPATH_PARTIAL: [101, "Path could not send full amount."],
  tecUNFUNDED_PAYMENT: [104, "Insufficient XRP balance to send."],
  tecNO_DST: [124, "Destination does not exist. Send XRP to create it."],
  tecNO_DST_INSUF_XRP: [125, "Destination does not exist. Too little XRP sent to create it."],
  tecPATH_DRY: [128, "Path could not send partial amount."],
  tecNO_LINE: [135, "No such line."],
  tefBAD_AUTH: [-196, "Transaction's public key is not authorized."],
  tefPAST_SEQ: [-190, "This sequence number has already passed."],
  tefMASTER_DISABLED: [-188, "Master key is disabled."],
  tefMAX_LEDGER: [-187, "Ledger sequence too high."],
  tefNO_TICKET: [-180, "Ticket is not in ledger."],
  temBAD_AMOUNT: [-298, "Can only send positive amounts."],
  temBAD_SEND_XRP_MAX: [-287, "Send max is not allowed for XRP to XRP."],
  temBAD_SEND_XRP_PARTIAL: [-285, "Partial payment is not allowed for XRP to XRP."],
  temBAD_SEND_XRP_PATHS: [-284, "Paths are not allowed for XRP to XRP."],
  temBAD_SIGNATURE: [-282, "Invalid signature."],
  temDST_IS_SRC: [-279, "Destination may not be source."],
  temMALFORMED: [-299, "Malformed transaction."],
  telINSUF_FEE_P: [-394, "Fee insufficient."],
  telNETWORK_ID_MAKES_TX_NON_CANONICAL: [
    -384,
    "Transactions submitted to this network must not include NetworkID.",
  ],
  terINSUF_FEE_B: [-97, "Account balance can't pay fee."],
  terNO_ACCOUNT: [-96, "The source account does not exist."],
  terPRE_SEQ: [-92, "Missing/inapplicable prior transaction."],
  terQUEUED: [-89, "Held until escalated fee drops."],
} as const satisfies Record<string, readonly [number, string]>;

export type EngineResult = keyof typeof ENGINE_RESULTS;

export function describeResult(result: EngineResult) {
  const [code, message] = ENGINE_RESULTS[result];
  return { engine_result: result, engine_result_code: code, engine_result_message: message };
}

/** Applied to the ledger: the fee is claimed and the sequence consumed. */
export function isApplied(result: EngineResult): boolean {
  return result.startsWith("tes") || result.startsWith("tec");
}
