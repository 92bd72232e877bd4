import { useEffect, useRef, useState } from "react";
import { useQuery } from "@tanstack/react-query";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { api } from "../api.js";
import { Loadable } from "../ui.js";
import type { MetricsSeries as MetricsData } from "../../../src/features/dashboard/activity.js";

/** What our signers' transactions for this account's settlements cost on one network. */
type GasSpent = MetricsData["gasSpent"][number];

const RANGES = [
  { id: "24h", label: "24 hours" },
  { id: "7d", label: "7 days" },
  { id: "30d", label: "30 days" },
] as const;
const COLORS = ["#1f6feb", "#b42318", "#1a7f37", "#8250df", "#bc4c00", "#0a7ea4"];

export function Metrics() {
  const [range, setRange] = useState<(typeof RANGES)[number]["id"]>("24h");
  const metrics = useQuery({
    queryKey: ["metrics", range],
    queryFn: () => api<MetricsData>(`/api/metrics?range=${range}`),
  });
  return (
    <>
      <div className="segmented" role="group" aria-label="Time range">
        {RANGES.map((r) => (
          <button
            key={r.id}
            type="button"
            aria-pressed={range === r.id}
            onClick={() => setRange(r.id)}
          >
            {r.label}
          </button>
        ))}
      </div>
      <Loadable query={metrics} label="metrics">
        {(m) => {
          const times = m.buckets.map((b) => Date.parse(b) / 1000);
          const label = (i: number) =>
            new Date(m.buckets[i]!).toLocaleString(undefined, {
              month: "short",
              day: "numeric",
              ...(m.bucketSeconds < 86_400 ? { hour: "2-digit", minute: "2-digit" } : {}),
            });
          return (
            <>
              <ChartWithTable
                title="Settlements"
                times={times}
                label={label}
                series={[
                  { name: "Succeeded", values: m.settlements.succeeded },
                  { name: "Failed", values: m.settlements.failed },
                ]}
              />
              <ChartWithTable
                title="Settlements by network"
                times={times}
                label={label}
                series={m.byNetwork.map((n) => ({ name: n.network, values: n.settlements }))}
              />
              <ChartWithTable
                title="Volume by asset (token units)"
                times={times}
                label={label}
                series={m.volumeByAsset.map((v) => ({
                  name: `${v.symbol ?? v.asset.slice(0, 10)} on ${v.network}`,
                  values: v.amounts,
                }))}
              />
              <GasTable rows={m.gasSpent} />
            </>
          );
        }}
      </Loadable>
    </>
  );
}

function GasTable({ rows }: { rows: GasSpent[] }) {
  return (
    <section aria-labelledby="gas-h">
      <h2 id="gas-h">Gas our signers spent on your settlements</h2>
      <p className="muted">
        The transactions sent for your settlements started in this range, and what they cost in each
        chain's native token. Reverted ones failed on-chain: their gas is spent all the same.
      </p>
      {rows.length === 0 ? (
        <p className="empty">No transactions were sent for your settlements in this range.</p>
      ) : (
        <div className="scroll">
          <table className="gas">
            <caption className="sr-only">
              Transactions sent for settlements started in this range, by network
            </caption>
            <thead>
              <tr>
                <th scope="col">Network</th>
                <th scope="col">Transactions</th>
                <th scope="col">Of which reverted</th>
                <th scope="col">Cost</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((g) => (
                <tr key={g.network}>
                  <td>{g.network}</td>
                  <td>{g.transactions}</td>
                  <td>{g.reverted}</td>
                  <td>
                    {g.feeInUnits !== null
                      ? `${g.feeInUnits} ${g.symbol}`
                      : g.fee !== null
                        ? `${g.fee} (smallest native unit)`
                        : "not reported"}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function ChartWithTable({
  title,
  times,
  label,
  series,
}: {
  title: string;
  times: number[];
  label: (i: number) => string;
  series: { name: string; values: number[] }[];
}) {
  const id = title.toLowerCase().replace(/[^a-z]+/g, "-");
  const nonEmpty = series.some((s) => s.values.some((v) => v > 0));
  return (
    <section aria-labelledby={`${id}-h`} className="chart-block">
      <h2 id={`${id}-h`}>{title}</h2>
      {nonEmpty ? (
        <>
          <Chart times={times} series={series} label={title} />
          <details>
            <summary>Data table</summary>
            <div className="scroll">
              <table>
                <caption className="sr-only">{title}</caption>
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    {series.map((s) => (
                      <th scope="col" key={s.name}>
                        {s.name}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {times.map((_, i) => (
                    <tr key={i}>
                      <th scope="row">{label(i)}</th>
                      {series.map((s) => (
                        <td key={s.name}>{s.values[i]}</td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </details>
        </>
      ) : (
        <p className="empty">Nothing in this range yet.</p>
      )}
    </section>
  );
}

function Chart({
  times,
  series,
  label,
}: {
  times: number[];
  series: { name: string; values: number[] }[];
  label: string;
}) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const width = () => Math.max(280, el.clientWidth);
    const plot = new uPlot(
      {
        width: width(),
        height: 220,
        series: [
          {},
          ...series.map((s, i) => ({
            label: s.name,
            stroke: COLORS[i % COLORS.length],
            fill: `${COLORS[i % COLORS.length]}22`,
            width: 2,
            // Bars only: a point marker on every empty bucket drowned the data.
            points: { show: false },
            paths: uPlot.paths.bars!({ size: [0.6, 40] }),
          })),
        ],
        axes: [{}, { size: 50 }],
        // Half a bucket of room at each end, so the first and last bars are
        // drawn whole instead of cut in half by the plot's edge.
        scales: {
          x: {
            time: true,
            range: (_u, min, max) => {
              const half = times.length > 1 ? (times[1]! - times[0]!) / 2 : 1800;
              return [min - half, max + half];
            },
          },
        },
      },
      [times, ...series.map((s) => s.values)],
      el,
    );
    const resize = new ResizeObserver(() => plot.setSize({ width: width(), height: 220 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [times, series]);
  return (
    <div ref={host} role="img" aria-label={`${label} chart; the data table below has the values`} />
  );
}
