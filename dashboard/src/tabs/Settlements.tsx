import { useState, type FormEvent } from "react";
import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { api, type ApiKey, type Settlement } from "../api.js";
import { Loadable, shortHex, when } from "../ui.js";

interface Filters {
  network: string;
  scheme: string;
  status: string;
  keyId: string;
  from: string;
  to: string;
  q: string;
}
const EMPTY: Filters = { network: "", scheme: "", status: "", keyId: "", from: "", to: "", q: "" };

function queryString(f: Filters): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) {
    if (!v) continue;
    p.set(k, k === "from" || k === "to" ? new Date(v).toISOString() : v);
  }
  return p.toString();
}

export function Settlements() {
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const keys = useQuery({
    queryKey: ["keys"],
    queryFn: () => api<{ keys: ApiKey[] }>("/api/keys"),
  });
  const qs = queryString(filters);
  const pages = useInfiniteQuery({
    queryKey: ["settlements", qs],
    initialPageParam: "",
    queryFn: ({ pageParam }) =>
      api<{ items: Settlement[]; nextCursor: string | null }>(
        `/api/settlements?limit=50${qs ? `&${qs}` : ""}${pageParam ? `&cursor=${encodeURIComponent(pageParam)}` : ""}`,
      ),
    getNextPageParam: (last) => last.nextCursor ?? undefined,
    refetchInterval: 10_000,
  });
  const set = (k: keyof Filters) => (e: { target: { value: string } }) =>
    setDraft({ ...draft, [k]: e.target.value });
  const apply = (e: FormEvent) => {
    e.preventDefault();
    setFilters(draft);
  };
  return (
    <>
      <form className="filters" onSubmit={apply} aria-label="Filter settlements">
        <label>
          Search payer or transaction
          <input type="search" value={draft.q} onChange={set("q")} placeholder="0x…" />
        </label>
        <label>
          Network
          <input value={draft.network} onChange={set("network")} placeholder="eip155:8453" />
        </label>
        <label>
          Scheme
          <select value={draft.scheme} onChange={set("scheme")}>
            <option value="">Any</option>
            <option value="exact">exact</option>
            <option value="upto">upto</option>
            <option value="batch-settlement">batch-settlement</option>
          </select>
        </label>
        <label>
          Status
          <select value={draft.status} onChange={set("status")}>
            <option value="">Any</option>
            <option value="succeeded">succeeded</option>
            <option value="failed">failed</option>
            <option value="pending">pending</option>
            <option value="not_attempted">not attempted</option>
          </select>
        </label>
        <label>
          API key
          <select value={draft.keyId} onChange={set("keyId")}>
            <option value="">Any</option>
            {keys.data?.keys.map((k) => (
              <option key={k.id} value={k.id}>
                {k.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          From
          <input type="datetime-local" value={draft.from} onChange={set("from")} />
        </label>
        <label>
          To
          <input type="datetime-local" value={draft.to} onChange={set("to")} />
        </label>
        <div className="filter-actions">
          <button type="submit" className="primary">
            Apply
          </button>
          <button
            type="button"
            onClick={() => {
              setDraft(EMPTY);
              setFilters(EMPTY);
            }}
          >
            Clear
          </button>
          <a className="button" href={`/api/settlements.csv${qs ? `?${qs}` : ""}`} download>
            Export CSV
          </a>
        </div>
      </form>
      <Loadable query={pages} label="settlements">
        {(data) => {
          const items = data.pages.flatMap((p) => p.items);
          if (items.length === 0) return <p className="empty">No settlements match.</p>;
          return (
            <>
              <div className="scroll">
                <table className="settlements">
                  <thead>
                    <tr>
                      <th scope="col">Time</th>
                      <th scope="col">Status</th>
                      <th scope="col">Amount</th>
                      <th scope="col">Network</th>
                      <th scope="col">Scheme</th>
                      <th scope="col">Key</th>
                      <th scope="col">Payer</th>
                      <th scope="col">Transaction</th>
                    </tr>
                  </thead>
                  <tbody>
                    {items.map((s) => (
                      <tr key={s.id}>
                        <td>{when(s.startedAt)}</td>
                        <td>
                          <span className={`pill ${s.status}`}>{s.status}</span>
                          {s.reason && (
                            <div className="muted" title={s.message ?? ""}>
                              {s.reason}
                            </div>
                          )}
                        </td>
                        <td title={`${s.amount} atomic units`}>
                          {s.amountInUnits ? `${s.amountInUnits} ${s.assetSymbol}` : s.amount}
                          <div className="muted">{s.amount} atomic</div>
                        </td>
                        <td>{s.network}</td>
                        <td>{s.scheme}</td>
                        <td>{s.apiKeyName}</td>
                        <td className="mono" title={s.payer ?? ""}>
                          {shortHex(s.payer)}
                        </td>
                        <td className="mono">
                          {s.explorerUrl ? (
                            <a
                              href={s.explorerUrl}
                              target="_blank"
                              rel="noreferrer"
                              title={s.transaction ?? ""}
                            >
                              {shortHex(s.transaction)}
                            </a>
                          ) : (
                            <span title={s.transaction ?? ""}>{shortHex(s.transaction)}</span>
                          )}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              {pages.hasNextPage && (
                <button
                  type="button"
                  onClick={() => void pages.fetchNextPage()}
                  disabled={pages.isFetchingNextPage}
                >
                  {pages.isFetchingNextPage ? "Loading…" : "Load older settlements"}
                </button>
              )}
            </>
          );
        }}
      </Loadable>
    </>
  );
}
