import { useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, type BillingHistoryEntry, type PlanStatus } from "../api.js";
import { ErrorNote, Loadable, shortHex, when } from "../ui.js";
import type { CheckoutResult } from "../billingPayment.js";

/** Whether a browser wallet (EIP-1193) is there to pay with. */
const hasBrowserWallet = () => Boolean((window as { ethereum?: unknown }).ethereum);

const NAMES: Record<string, string> = {
  free: "Free",
  starter: "Starter",
  pro: "Pro",
  max: "Max",
  payg: "Pay-as-you-go",
};
const PAID = ["starter", "pro", "max"];
const RANK: Record<string, number> = { free: 0, payg: 0, starter: 1, pro: 2, max: 3 };

/** A date as the service's periods are: the UTC calendar day. */
const day = (iso: string | null) => (iso ? iso.slice(0, 10) : "—");

/** What the person chose to pay for, with its price as shown. */
type Order = { plan: string; priceUsd: string } | { topUpUsd: string; priceUsd: string };

export function Plans() {
  const queryClient = useQueryClient();
  const plan = useQuery({ queryKey: ["plan"], queryFn: () => api<PlanStatus>("/api/plans") });
  const history = useQuery({
    queryKey: ["billing-history"],
    queryFn: () => api<{ items: BillingHistoryEntry[] }>("/api/billing/history"),
  });
  const [order, setOrder] = useState<Order | null>(null);
  const [topUp, setTopUp] = useState("");
  const [done, setDone] = useState<string | null>(null);
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: ["plan"] });
    void queryClient.invalidateQueries({ queryKey: ["billing-history"] });
    void queryClient.invalidateQueries({ queryKey: ["overview"] });
  };
  const change = useMutation({
    mutationFn: (to: "free" | "payg") =>
      api<PlanStatus & { effective: string | null }>("/api/billing/plan-change", {
        method: "POST",
        body: { plan: to },
      }),
    onSuccess: (data) => {
      setDone(
        data.plan === "payg" && data.nextPlan === null
          ? "You are now on Pay-as-you-go. It applies to your next settlement."
          : `Your plan changes to ${NAMES[data.nextPlan ?? "free"]} on ${day(data.effective)}.`,
      );
      refresh();
    },
  });
  const keep = useMutation({
    mutationFn: () => api<PlanStatus>("/api/billing/plan-change", { method: "DELETE" }),
    onSuccess: () => {
      setDone("The scheduled change is cancelled.");
      refresh();
    },
  });
  const pay = useMutation({
    mutationFn: async (
      how: { wallet: "browser" } | { devnetKey: string },
    ): Promise<CheckoutResult> => {
      if (!order) throw new Error("Choose a plan or a top-up first.");
      // The x402 client and viem are loaded only when someone pays.
      const { browserWalletSigner, devnetSigner, payThroughCheckout } =
        await import("../billingPayment.js");
      const network = plan.data!.billing.networks[0]!;
      const signer =
        "devnetKey" in how
          ? devnetSigner(how.devnetKey)
          : await browserWalletSigner(network.chainId);
      const body = "plan" in order ? { plan: order.plan } : { topUpUsd: order.topUpUsd };
      return payThroughCheckout(body, order.priceUsd, signer, network.chainId);
    },
    onSuccess: (result) => {
      const status = result.body["plan"] as PlanStatus | undefined;
      if (result.status === 202) {
        setDone("The payment was sent and is waiting for confirmation; it applies once confirmed.");
      } else if (order && "plan" in order && status) {
        setDone(
          status.plan === order.plan
            ? `Paid. You are on the ${NAMES[status.plan]} plan until ${day(status.paidUntil)}.`
            : `Paid. ${NAMES[order.plan]} starts when your ${NAMES[status.plan]} period ends (${day(status.paidUntil)}).`,
        );
      } else if (status) {
        setDone(`Paid. Your pay-as-you-go balance is ${status.balanceUsd} USD.`);
      }
      setOrder(null);
      refresh();
    },
  });

  return (
    <Loadable query={plan} label="your plan">
      {(p) => {
        const billing = p.billing;
        const ends = p.paidUntil !== null;
        return (
          <>
            {p.suspended && (
              <p className="error" role="alert">
                This account is suspended. {p.suspendedReason}
              </p>
            )}
            <section aria-labelledby="usage-h">
              <h2 id="usage-h">
                {NAMES[p.plan] ?? p.plan} plan · {p.month}
              </h2>
              <p data-testid="plan-period">
                {ends
                  ? p.plan === "payg"
                    ? `Pay-as-you-go until ${day(p.paidUntil)}, then ${NAMES[p.nextPlan ?? "free"]}`
                    : `${NAMES[p.plan]} until ${day(p.paidUntil)}, then ${NAMES[p.nextPlan ?? "free"]}${p.nextPlanPaid ? " (paid)" : ""}`
                  : PAID.includes(p.plan)
                    ? `${NAMES[p.plan]} with no end date (set by the operator)`
                    : "No paid period"}
              </p>
              {p.nextPlanChosen && !p.nextPlanPaid && (
                <button type="button" disabled={keep.isPending} onClick={() => keep.mutate()}>
                  Keep {NAMES[p.plan]}
                </button>
              )}
              <label htmlFor="usage">
                {p.usedThisMonth.toLocaleString("en-US")} of {p.limit.toLocaleString("en-US")}{" "}
                settlements used this month
              </label>
              <progress id="usage" max={p.limit} value={Math.min(p.usedThisMonth, p.limit)} />
              {!p.metered && <p className="muted">Quotas are not enforced on this deployment.</p>}
              {(p.plan === "payg" || p.balanceMicroUsd !== "0") && (
                <p data-testid="payg-balance">
                  Pay-as-you-go balance: <strong>{p.balanceUsd} USD</strong>
                  <span className="muted">
                    {" "}
                    · {billing.payg.freeSettlementsPerMonth.toLocaleString()} settlements a month
                    free, then {billing.payg.usdPerSettlement} USD each, drawn from the balance
                  </span>
                </p>
              )}
            </section>
            <ErrorNote error={change.error ?? keep.error} />
            {done && (
              <p className="ok" role="status">
                {done}
              </p>
            )}
            {!billing.enabled && (
              <p className="muted">
                This deployment does not sell plans: ask its operator to change yours.
              </p>
            )}
            <ul className="plans">
              {p.plans.map((o) => {
                const current = o.plan === p.plan;
                const paid = PAID.includes(o.plan);
                const price = o.usdPerPeriod;
                return (
                  <li key={o.plan} className={current ? "current" : ""}>
                    <h3>{NAMES[o.plan] ?? o.plan}</h3>
                    <p className="big">{o.monthlySettlements.toLocaleString()}</p>
                    <p className="muted">
                      {o.plan === "payg"
                        ? `settlements a month included, then $${o.usdPerExtraSettlement} each`
                        : "settlements a month"}
                    </p>
                    {price && (
                      <p>
                        <strong>{price} USD</strong> / {billing.periodDays} days
                      </p>
                    )}
                    {current && <p className="current-label">Current plan</p>}
                    {paid && billing.enabled && !(current && !ends) && (
                      <button
                        type="button"
                        className="primary"
                        disabled={pay.isPending || p.suspended}
                        onClick={() => {
                          setDone(null);
                          setOrder({ plan: o.plan, priceUsd: price! });
                        }}
                      >
                        {current
                          ? `Renew ${NAMES[o.plan]}`
                          : RANK[o.plan]! < RANK[p.plan]!
                            ? `Choose ${NAMES[o.plan]} from ${day(p.paidUntil)}`
                            : `Choose ${NAMES[o.plan]}`}
                      </button>
                    )}
                    {!paid && !current && (
                      <button
                        type="button"
                        disabled={change.isPending || (p.nextPlanChosen && p.nextPlan === o.plan)}
                        onClick={() => change.mutate(o.plan as "free" | "payg")}
                      >
                        {p.plan === "free"
                          ? `Switch to ${NAMES[o.plan]}`
                          : p.plan === "payg"
                            ? `Switch to ${NAMES[o.plan]} at the month's end`
                            : `Switch to ${NAMES[o.plan]} when ${NAMES[p.plan]} ends`}
                      </button>
                    )}
                  </li>
                );
              })}
            </ul>
            <p className="muted" data-testid="swap-settlement">
              Swap settlement (pay in one token, settle in another) is experimental and not
              available yet: every plan settles in the token the payer signed for.
            </p>
            {billing.enabled && (
              <section aria-labelledby="topup-h">
                <h2 id="topup-h">Top up pay-as-you-go</h2>
                <form
                  className="inline-form"
                  onSubmit={(e) => {
                    e.preventDefault();
                    setDone(null);
                    setOrder({ topUpUsd: topUp.trim(), priceUsd: topUp.trim() });
                  }}
                >
                  <label htmlFor="topup">Amount (USD, at least {billing.topUpMinUsd})</label>
                  <input
                    id="topup"
                    inputMode="decimal"
                    value={topUp}
                    onChange={(e) => setTopUp(e.target.value)}
                    pattern="\d+(\.\d{1,6})?"
                    required
                  />
                  <button type="submit">Top up</button>
                </form>
              </section>
            )}
            {order && (
              <section aria-labelledby="pay-h" className="secret" data-testid="pay-panel">
                <h2 id="pay-h">
                  {"plan" in order
                    ? `Pay for ${NAMES[order.plan]}: ${order.priceUsd} USD`
                    : `Top up ${order.priceUsd} USD`}
                </h2>
                <p>
                  Paid in USDC with x402 ({billing.networks.map((n) => n.network).join(", ")}) to{" "}
                  <code>{shortHex(billing.payTo)}</code>.{" "}
                  {"plan" in order
                    ? `${billing.periodDays} days; it takes effect as soon as the payment settles (a lower plan waits for the end of the current period). Nothing is refunded automatically.`
                    : "Added to the balance pay-as-you-go charges are drawn from; a suspension for an unpaid balance lifts at once."}
                </p>
                <ErrorNote error={pay.error} />
                <div className="inline-form">
                  {hasBrowserWallet() && (
                    <button
                      type="button"
                      className="primary"
                      disabled={pay.isPending}
                      onClick={() => pay.mutate({ wallet: "browser" })}
                    >
                      Pay with browser wallet
                    </button>
                  )}
                  {billing.devnetPayers?.slice(0, 3).map((d, i) => (
                    <button
                      key={d.address}
                      type="button"
                      disabled={pay.isPending}
                      onClick={() => pay.mutate({ devnetKey: d.privateKey })}
                    >
                      Pay with devnet payer {i + 1} ({shortHex(d.address, 4)})
                    </button>
                  ))}
                  <button type="button" disabled={pay.isPending} onClick={() => setOrder(null)}>
                    Cancel
                  </button>
                </div>
                {!hasBrowserWallet() && !billing.devnetPayers && (
                  <p className="muted">Open this page in a browser with a wallet to pay.</p>
                )}
                {pay.isPending && (
                  <p className="status" role="status">
                    <span className="spinner" aria-hidden="true" /> Waiting for the signature and
                    the settlement…
                  </p>
                )}
              </section>
            )}
            <section aria-labelledby="history-h">
              <h2 id="history-h">Billing history</h2>
              <p>
                <a href="/api/billing/history.csv" download>
                  Download CSV
                </a>
              </p>
              <Loadable query={history} label="the billing history">
                {(h) =>
                  h.items.length === 0 ? (
                    <p className="empty">No payments yet.</p>
                  ) : (
                    <div className="scroll">
                      <table className="billing-history">
                        <thead>
                          <tr>
                            <th scope="col">Date</th>
                            <th scope="col">What</th>
                            <th scope="col">Amount</th>
                            <th scope="col">Network</th>
                            <th scope="col">Transaction</th>
                            <th scope="col">Period</th>
                          </tr>
                        </thead>
                        <tbody>
                          {h.items.map((e) => (
                            <tr key={e.id}>
                              <td>{when(e.date)}</td>
                              <td>
                                {e.kind === "top_up"
                                  ? "Top-up"
                                  : `${NAMES[e.plan ?? ""] ?? e.plan}${e.kind === "comp" ? " (comp by the operator)" : ""}`}
                                {e.status !== "paid" && ` · ${e.status}`}
                              </td>
                              <td>{e.amountUsd} USD</td>
                              <td>{e.network ?? "—"}</td>
                              <td>
                                {e.explorerUrl ? (
                                  <a href={e.explorerUrl} target="_blank" rel="noreferrer">
                                    {shortHex(e.transaction)}
                                  </a>
                                ) : (
                                  <code title={e.transaction ?? ""}>{shortHex(e.transaction)}</code>
                                )}
                              </td>
                              <td>
                                {e.periodStart
                                  ? `${day(e.periodStart)} → ${day(e.periodEnd)}`
                                  : "—"}
                              </td>
                            </tr>
                          ))}
                        </tbody>
                      </table>
                    </div>
                  )
                }
              </Loadable>
            </section>
          </>
        );
      }}
    </Loadable>
  );
}
