import { useState, type FormEvent } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, type ApiKey, type Session } from "../api.js";
import { CopyButton, ErrorNote, Loadable, when } from "../ui.js";

export function Keys({ session }: { session: Session }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState("");
  const keys = useQuery({
    queryKey: ["keys"],
    queryFn: () => api<{ keys: ApiKey[] }>("/api/keys"),
  });
  const create = useMutation({
    mutationFn: (n: string) =>
      api<ApiKey & { key: string }>("/api/keys", { method: "POST", body: { name: n } }),
    onSuccess: () => {
      setName("");
      void queryClient.invalidateQueries({ queryKey: ["keys"] });
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => api(`/api/keys/${id}`, { method: "DELETE" }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["keys"] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (name.trim()) create.mutate(name.trim());
  };
  return (
    <>
      <form className="inline-form" onSubmit={submit}>
        <label htmlFor="key-name">Key name</label>
        <input
          id="key-name"
          value={name}
          onChange={(e) => setName(e.target.value)}
          placeholder="production"
          maxLength={100}
          required
        />
        <button type="submit" className="primary" disabled={create.isPending}>
          {create.isPending ? "Creating…" : "Create key"}
        </button>
      </form>
      <ErrorNote error={create.error} />
      {create.data && (
        <div className="secret" role="status" aria-live="polite">
          <p>
            <strong>{create.data.name}</strong>: copy this key now. It is shown only once.
          </p>
          <code data-testid="new-key">{create.data.key}</code> <CopyButton text={create.data.key} />
          <p className="muted">
            Send it as <code>X-API-Key</code> to {session.facilitatorUrl}/verify and /settle.
          </p>
        </div>
      )}
      <ErrorNote error={remove.error} />
      <Loadable query={keys} label="API keys">
        {(data) =>
          data.keys.length === 0 ? (
            <p className="empty">No API keys yet. Create one to start settling payments.</p>
          ) : (
            <div className="scroll">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Key</th>
                    <th scope="col">Created</th>
                    <th scope="col">Last used</th>
                    <th scope="col">
                      <span className="sr-only">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {data.keys.map((k) => (
                    <tr key={k.id}>
                      <td>{k.name}</td>
                      <td className="mono">{k.prefix}</td>
                      <td>{when(k.createdAt)}</td>
                      <td>{when(k.lastUsedAt)}</td>
                      <td>
                        <button
                          type="button"
                          className="danger"
                          aria-label={`Delete key ${k.name}`}
                          onClick={() => {
                            if (
                              confirm(
                                `Delete the key "${k.name}"? Requests using it are refused at once.`,
                              )
                            )
                              remove.mutate(k.id);
                          }}
                        >
                          Delete
                        </button>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Loadable>
    </>
  );
}
