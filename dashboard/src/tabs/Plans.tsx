import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, type PlanStatus } from "../api.js";
import { ErrorNote, Loadable } from "../ui.js";

const NAMES: Record<string, string> = {
  free: "Free",
  starter: "Starter",
  pro: "Pro",
  max: "Max",
  payg: "Pay-as-you-go",
};

export function Plans() {
  const queryClient = useQueryClient();
  const plan = useQuery({ queryKey: ["plan"], queryFn: () => api<PlanStatus>("/api/plans") });
  const change = useMutation({
    mutationFn: (to: string) =>
      api<PlanStatus>("/api/billing/upgrade", { method: "POST", body: { plan: to } }),
    onSuccess: (data) => {
      queryClient.setQueryData(["plan"], data);
      void queryClient.invalidateQueries({ queryKey: ["overview"] });
    },
  });
  return (
    <Loadable query={plan} label="your plan">
      {(p) => (
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
            <label htmlFor="usage">
              {p.usedThisMonth} of {p.limit} settlements used this month
            </label>
            <progress id="usage" max={p.limit} value={Math.min(p.usedThisMonth, p.limit)} />
            {!p.metered && <p className="muted">Quotas are not enforced on this deployment.</p>}
          </section>
          <ErrorNote error={change.error} />
          {change.isSuccess && (
            <p className="ok" role="status">
              You are now on the {NAMES[change.data.plan]} plan. It applies to your next settlement.
            </p>
          )}
          <ul className="plans">
            {p.plans.map((o) => (
              <li key={o.plan} className={o.plan === p.plan ? "current" : ""}>
                <h3>{NAMES[o.plan] ?? o.plan}</h3>
                <p className="big">{o.monthlySettlements.toLocaleString()}</p>
                <p className="muted">
                  {o.plan === "payg"
                    ? `settlements a month included, then $${o.usdPerExtraSettlement} each`
                    : "settlements a month"}
                </p>
                {o.plan === p.plan ? (
                  <p className="current-label">Current plan</p>
                ) : (
                  <button
                    type="button"
                    className="primary"
                    disabled={change.isPending}
                    onClick={() => change.mutate(o.plan)}
                  >
                    Switch to {NAMES[o.plan]}
                  </button>
                )}
              </li>
            ))}
          </ul>
        </>
      )}
    </Loadable>
  );
}
