import { useEffect, useState, type FormEvent } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api } from "../api.js";
import { CopyButton, ErrorNote, Loadable, when } from "../ui.js";

interface Endpoint {
  url: string;
  events: string[];
  secretHint: string;
  updatedAt: string;
}
interface EventEntry {
  id: string;
  type: string;
  status: string;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
}

export function Webhooks() {
  const queryClient = useQueryClient();
  const hook = useQuery({
    queryKey: ["webhook"],
    queryFn: () => api<{ endpoint: Endpoint | null; eventTypes: string[] }>("/api/webhooks"),
  });
  const events = useQuery({
    queryKey: ["webhook-events"],
    queryFn: () => api<{ events: EventEntry[] }>("/api/webhooks/events"),
    refetchInterval: 2_000,
  });
  const [url, setUrl] = useState("");
  const [chosen, setChosen] = useState<string[]>([]);
  const [secret, setSecret] = useState<string | null>(null);
  useEffect(() => {
    if (hook.data) {
      setUrl(hook.data.endpoint?.url ?? "");
      setChosen(hook.data.endpoint?.events ?? hook.data.eventTypes);
    }
  }, [hook.data]);
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: ["webhook"] });
    void queryClient.invalidateQueries({ queryKey: ["webhook-events"] });
  };
  const save = useMutation({
    mutationFn: () =>
      api<{ secret: string | null }>("/api/webhooks", {
        method: "PUT",
        body: { url, events: chosen },
      }),
    onSuccess: (r) => {
      if (r.secret) setSecret(r.secret);
      refresh();
    },
  });
  const rotate = useMutation({
    mutationFn: () => api<{ secret: string }>("/api/webhooks/secret", { method: "POST" }),
    onSuccess: (r) => {
      setSecret(r.secret);
      refresh();
    },
  });
  const test = useMutation({
    mutationFn: () => api("/api/webhooks/test", { method: "POST" }),
    onSuccess: refresh,
  });
  const resend = useMutation({
    mutationFn: (id: string) => api(`/api/webhooks/events/${id}/resend`, { method: "POST" }),
    onSuccess: refresh,
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate();
  };
  return (
    <Loadable query={hook} label="the webhook settings">
      {(h) => (
        <>
          <form className="stack-form" onSubmit={submit}>
            <label htmlFor="hook-url">Endpoint URL</label>
            <input
              id="hook-url"
              type="url"
              required
              value={url}
              onChange={(e) => setUrl(e.target.value)}
              placeholder="https://api.example.com/x402-webhooks"
            />
            <fieldset>
              <legend>Events</legend>
              {h.eventTypes.map((t) => (
                <label key={t} className="check">
                  <input
                    type="checkbox"
                    checked={chosen.includes(t)}
                    onChange={(e) =>
                      setChosen(e.target.checked ? [...chosen, t] : chosen.filter((c) => c !== t))
                    }
                  />
                  {t}
                </label>
              ))}
            </fieldset>
            <div className="row">
              <button
                type="submit"
                className="primary"
                disabled={save.isPending || chosen.length === 0}
              >
                {save.isPending ? "Saving…" : "Save endpoint"}
              </button>
              {h.endpoint && (
                <>
                  <button type="button" onClick={() => test.mutate()} disabled={test.isPending}>
                    Send test delivery
                  </button>
                  <button
                    type="button"
                    onClick={() => {
                      if (
                        confirm("Rotate the signing secret? Receivers must switch to the new one.")
                      )
                        rotate.mutate();
                    }}
                  >
                    Rotate secret
                  </button>
                </>
              )}
            </div>
          </form>
          <ErrorNote error={save.error ?? rotate.error ?? test.error ?? resend.error} />
          {test.isSuccess && (
            <p className="ok" role="status">
              Test delivery queued. It appears in the log below within seconds.
            </p>
          )}
          {secret && (
            <div className="secret" role="status">
              <p>Signing secret: copy it now. It is shown only once.</p>
              <code data-testid="webhook-secret">{secret}</code> <CopyButton text={secret} />
              <p className="muted">
                Verify deliveries with any Standard Webhooks library (HMAC-SHA256).
              </p>
            </div>
          )}
          {h.endpoint && !secret && (
            <p className="muted">Signing secret: {h.endpoint.secretHint}</p>
          )}
          <section aria-labelledby="log-h">
            <h2 id="log-h">Delivery log</h2>
            <Loadable query={events} label="the delivery log">
              {(d) =>
                d.events.length === 0 ? (
                  <p className="empty">No events yet.</p>
                ) : (
                  <div className="scroll">
                    <table className="deliveries">
                      <thead>
                        <tr>
                          <th scope="col">Created</th>
                          <th scope="col">Event</th>
                          <th scope="col">Status</th>
                          <th scope="col">Attempts</th>
                          <th scope="col">Response</th>
                          <th scope="col">
                            <span className="sr-only">Actions</span>
                          </th>
                        </tr>
                      </thead>
                      <tbody>
                        {d.events.map((ev) => (
                          <tr key={ev.id}>
                            <td>{when(ev.createdAt)}</td>
                            <td>
                              {ev.type}
                              <div className="muted mono">{ev.id}</div>
                            </td>
                            <td>
                              <span className={`pill ${ev.status}`}>{ev.status}</span>
                            </td>
                            <td>{ev.attempts}</td>
                            <td>{ev.lastStatusCode ?? ev.lastError ?? "—"}</td>
                            <td>
                              {ev.status === "failed" && (
                                <button type="button" onClick={() => resend.mutate(ev.id)}>
                                  Re-send
                                </button>
                              )}
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
      )}
    </Loadable>
  );
}
