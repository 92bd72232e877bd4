import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api } from "../api.js";
import type { CatalogOverview } from "../../../src/features/catalog/ownershipView.js";
import { CopyButton, ErrorNote, Loadable, when } from "../ui.js";

const STATE_PILL = { proven: "succeeded", unproven: "pending", stale: "failed" } as const;

const CLAIM_RESULT = {
  pending: "not checked yet",
  not_proven: "not proven: the resource's 402 names no payTo you settle to, and no challenge",
  owner_holds: "proven, but the holder's proof is as strong: publish your challenge",
} as const;

const EVENT_TEXT = {
  proven: "proven by the resource",
  unproven: "no longer proven: the resource's 402 names another payTo",
  stale: "stale: the resource stopped answering 402, left the listing",
  listed_again: "answering 402 again, listed again",
} as const;

function eventText(e: CatalogOverview["events"][number]): string {
  if (e.kind !== "takeover") return EVENT_TEXT[e.kind];
  const proof = e.detail["proof"] === "challenge" ? "its challenge" : "its 402's payTo";
  return e.role === "gained"
    ? `taken over from another account (proven by ${proof})`
    : "taken over by another account that the resource names";
}

const entryName = (e: { resource: string; toolName: string }) =>
  e.toolName ? `${e.resource} · ${e.toolName}` : e.resource;

/**
 * The Catalog tab: who owns this account's discovery entries, as the
 * resources themselves prove it (docs/discovery.md, "Who owns an entry").
 */
export function Catalog() {
  const queryClient = useQueryClient();
  const overview = useQuery({
    queryKey: ["catalog"],
    queryFn: () => api<CatalogOverview>("/api/catalog"),
    refetchInterval: 10_000,
  });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ["catalog"] });
  const challenge = useMutation({
    mutationFn: () =>
      api<{ path: string; token: string }>("/api/catalog/challenge", { method: "POST" }),
    onSuccess: refresh,
  });
  const check = useMutation({
    mutationFn: (e: { resource: string; toolName: string }) =>
      api<{ nextCheckAt: string }>("/api/catalog/check", { method: "POST", body: e }),
    onSuccess: refresh,
  });
  return (
    <Loadable query={overview} label="the catalog">
      {(o) => (
        <>
          <p className="muted">
            An entry of the public discovery catalog belongs to the account its resource names: the
            payTo of the resource's own 402 answer, paid by one of your settlements, or your
            challenge published on its origin. Entries whose resource stops answering 402 for a day
            leave the listing until it answers again.
          </p>
          <ErrorNote error={challenge.error ?? check.error} />
          <section aria-labelledby="entries-h">
            <h2 id="entries-h">Your entries</h2>
            {o.entries.length === 0 ? (
              <p className="empty">
                No entries yet. Declare the bazaar extension on a paid route and they appear here.
              </p>
            ) : (
              <div className="scroll">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Resource</th>
                      <th scope="col">State</th>
                      <th scope="col">Last 402</th>
                      <th scope="col">Last check</th>
                      <th scope="col">Claims</th>
                      <th scope="col">
                        <span className="sr-only">Actions</span>
                      </th>
                    </tr>
                  </thead>
                  <tbody>
                    {o.entries.map((e) => (
                      <tr key={`${e.resource}\n${e.toolName}`}>
                        <td className="mono">{entryName(e)}</td>
                        <td>
                          <span className={`pill ${STATE_PILL[e.state]}`}>{e.state}</span>
                          {e.proof && (
                            <div className="muted">
                              by {e.proof === "pay_to" ? "payTo" : "challenge"}
                            </div>
                          )}
                          {!e.listed && <div className="muted">not listed</div>}
                        </td>
                        <td>{when(e.last402At)}</td>
                        <td>
                          {when(e.lastCheckAt)}
                          {e.lastCheckError && <div className="muted">{e.lastCheckError}</div>}
                        </td>
                        <td>{e.claims}</td>
                        <td>
                          <button type="button" onClick={() => check.mutate(e)}>
                            Check soon
                          </button>
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </section>
          <section aria-labelledby="claims-h">
            <h2 id="claims-h">Your claims on entries another account holds</h2>
            {o.claims.length === 0 ? (
              <p className="empty">No claims.</p>
            ) : (
              <ul>
                {o.claims.map((c) => (
                  <li key={`${c.resource}\n${c.toolName}`}>
                    <span className="mono">{entryName(c)}</span>: {CLAIM_RESULT[c.result]}
                    <span className="muted"> (next check {when(c.nextCheckAt)})</span>{" "}
                    <button type="button" onClick={() => check.mutate(c)}>
                      Check soon
                    </button>
                  </li>
                ))}
              </ul>
            )}
          </section>
          <section aria-labelledby="challenge-h">
            <h2 id="challenge-h">Challenge</h2>
            <p className="muted">
              The strongest proof: a line of <code>{o.challenge.path}</code> on the resource's
              origin. It beats a payTo, which anyone can pay.
            </p>
            {o.challenge.token ? (
              <p>
                <code data-testid="catalog-challenge">{o.challenge.token}</code>{" "}
                <CopyButton text={o.challenge.token} />
              </p>
            ) : (
              <button
                type="button"
                onClick={() => challenge.mutate()}
                disabled={challenge.isPending}
              >
                Make my challenge
              </button>
            )}
          </section>
          <section aria-labelledby="events-h">
            <h2 id="events-h">Ownership events</h2>
            {o.events.length === 0 ? (
              <p className="empty">Nothing has happened to your entries yet.</p>
            ) : (
              <ul>
                {o.events.map((e, i) => (
                  <li key={i}>
                    {when(e.at)}: <span className="mono">{entryName(e)}</span> {eventText(e)}
                  </li>
                ))}
              </ul>
            )}
          </section>
        </>
      )}
    </Loadable>
  );
}
