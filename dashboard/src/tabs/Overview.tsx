import { useQuery } from "@tanstack/react-query";
import { api, type Session } from "../api.js";
import { CopyButton, Loadable, percent, when } from "../ui.js";
import type { Overview as ServerOverview } from "../../../src/features/dashboard/activity.js";
import type { PlanStatus } from "../../../src/features/plans/planStatus.js";

/** GET /api/overview: the account's activity, with its quota beside it. */
type OverviewData = ServerOverview & {
  quota: Pick<
    PlanStatus,
    "plan" | "limit" | "usedThisMonth" | "metered" | "suspended" | "paidUntil"
  >;
};

/** A network where settlements failed on-chain (our gas spent) in the last hour. */
type OnChainFailures = ServerOverview["onChainFailures"][number];

export function Overview({ session }: { session: Session }) {
  const overview = useQuery({
    queryKey: ["overview"],
    queryFn: () => api<OverviewData>("/api/overview"),
    refetchInterval: 10_000,
  });
  return (
    <>
      <Loadable query={overview} label="the overview">
        {(o) => (
          <>
            <OnChainFailuresNotes failures={o.onChainFailures} plan={o.quota.plan} />
            <section className="cards" aria-label="Activity">
              <Stat
                label="Settlements today"
                value={o.today.settlements}
                note={`${o.today.failed} failed`}
              />
              <Stat
                label="Settlements this month"
                value={o.month.settlements}
                note={`${o.month.failed} failed`}
              />
              <Stat label="Success rate (month)" value={percent(o.successRate)} />
              <Stat
                label="Quota used"
                value={`${o.quota.usedThisMonth} / ${o.quota.limit}`}
                note={`${o.quota.plan} plan${o.quota.paidUntil ? ` until ${o.quota.paidUntil.slice(0, 10)}` : ""}${o.quota.metered ? "" : " · not metered here"}${o.quota.suspended ? " · suspended" : ""}`}
              />
            </section>
            <section aria-labelledby="volume-h">
              <h2 id="volume-h">Volume this month</h2>
              {o.volumeThisMonth.length === 0 ? (
                <p className="empty">No successful settlements this month yet.</p>
              ) : (
                <div className="scroll">
                  <table>
                    <thead>
                      <tr>
                        <th scope="col">Network</th>
                        <th scope="col">Asset</th>
                        <th scope="col">Settlements</th>
                        <th scope="col">Volume</th>
                      </tr>
                    </thead>
                    <tbody>
                      {o.volumeThisMonth.map((v) => (
                        <tr key={`${v.network}|${v.asset}`}>
                          <td>{v.network}</td>
                          <td title={v.asset}>{v.symbol ?? v.asset}</td>
                          <td>{v.settlements}</td>
                          <td>
                            {v.amountInUnits
                              ? `${v.amountInUnits} ${v.symbol}`
                              : `${v.amount} (atomic)`}
                          </td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              )}
            </section>
            <section aria-labelledby="failures-h">
              <h2 id="failures-h">Latest failures</h2>
              {o.latestFailures.length === 0 ? (
                <p className="empty">No failed settlements.</p>
              ) : (
                <ul className="failures">
                  {o.latestFailures.map((f) => (
                    <li key={f.id}>
                      <strong>{f.reason ?? "failed"}</strong> on {f.network} · {when(f.at)}
                      {f.message && <div className="muted">{f.message}</div>}
                    </li>
                  ))}
                </ul>
              )}
            </section>
          </>
        )}
      </Loadable>
      <QuickStart url={session.facilitatorUrl} />
    </>
  );
}

/**
 * Settlements that failed on-chain cost gas, and past the plan's limit in an
 * hour /settle on that network answers 429 for a while: a clear warning for a
 * network held off, a quiet line for one with failures below the limit.
 */
function OnChainFailuresNotes({ failures, plan }: { failures: OnChainFailures[]; plan: string }) {
  if (failures.length === 0) return null;
  const held = failures.filter((f) => f.heldOffUntil !== null);
  const below = failures.filter((f) => f.heldOffUntil === null);
  const settlements = (n: number) => `${n} settlement${n === 1 ? "" : "s"}`;
  return (
    <>
      {held.map((f) => (
        <section
          key={f.network}
          className="error"
          style={{ marginBottom: "0.75rem" }}
          role="alert"
          aria-label={`Settles on ${f.network} held off`}
          data-testid="held-off"
        >
          <p>
            <strong>
              Settles on {f.network} are held off until {utcTime(f.heldOffUntil!)} UTC
            </strong>
            : {settlements(f.lastHour)} failed on-chain in the last hour ({plan} plan allows{" "}
            {f.limit}).
          </p>
          <p>
            Check the payments you send (an asset, balance or signature that fails on-chain) before
            retrying: each failure spends gas. Until then /settle on {f.network} answers 429{" "}
            <code>too_many_failed_settlements</code> with Retry-After; other networks are not
            affected.
          </p>
        </section>
      ))}
      {below.length > 0 && (
        <ul
          className="muted"
          style={{ margin: "0 0 0.75rem" }}
          aria-label="On-chain failures in the last hour"
        >
          {below.map((f) => (
            <li key={f.network}>
              {settlements(f.lastHour)} on {f.network} failed on-chain in the last hour
              {f.limit === null
                ? " (settlements are not metered here, so no limit holds them off)."
                : `; at ${f.limit} (${plan} plan) settles there are held off for up to an hour.`}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

/** "14:05": the time of day in UTC, as the warning names it. */
function utcTime(iso: string): string {
  return new Date(iso).toISOString().slice(11, 16);
}

function Stat({ label, value, note }: { label: string; value: string | number; note?: string }) {
  return (
    <div className="card">
      <div className="card-label">{label}</div>
      <div className="card-value">{value}</div>
      {note && <div className="muted">{note}</div>}
    </div>
  );
}

function QuickStart({ url }: { url: string }) {
  const snippet = `import { HTTPFacilitatorClient } from "@x402/core/server";

const facilitator = new HTTPFacilitatorClient({
  url: "${url}",
  createAuthHeaders: async () => ({
    verify: { "X-API-Key": process.env.X402_API_KEY! },
    settle: { "X-API-Key": process.env.X402_API_KEY! },
    supported: {},
  }),
});`;
  return (
    <section aria-labelledby="quick-h" className="quick">
      <h2 id="quick-h">Quick start</h2>
      <p>
        Facilitator URL: <code>{url}</code> <CopyButton text={url} label="Copy URL" />
      </p>
      <p>Create a key in API Keys, then point your resource server's facilitator client here:</p>
      <pre>
        <code>{snippet}</code>
      </pre>
      <CopyButton text={snippet} label="Copy snippet" />
    </section>
  );
}
