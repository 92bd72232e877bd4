import { useQuery } from "@tanstack/react-query";
import { api, type Session } from "../api.js";
import { CopyButton, Loadable, percent, when } from "../ui.js";

interface OverviewData {
  today: { settlements: number; succeeded: number; failed: number };
  month: { settlements: number; succeeded: number; failed: number };
  successRate: number | null;
  volumeThisMonth: {
    network: string;
    asset: string;
    symbol: string | null;
    settlements: number;
    amount: string;
    amountInUnits: string | null;
  }[];
  quota: {
    plan: string;
    limit: number;
    usedThisMonth: number;
    metered: boolean;
    suspended: boolean;
    paidUntil: string | null;
  };
  latestFailures: {
    id: string;
    network: string;
    reason: string | null;
    message: string | null;
    at: string;
  }[];
}

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
