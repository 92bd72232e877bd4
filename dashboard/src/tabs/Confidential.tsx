import { useQuery } from "@tanstack/react-query";
import { api } from "../api.js";
import { Loadable } from "../ui.js";

export function Confidential() {
  const info = useQuery({
    queryKey: ["confidential"],
    queryFn: () => api<{ available: boolean; description: string }>("/api/confidential"),
  });
  return (
    <Loadable query={info} label="confidential settlement">
      {(c) => (
        <section className="notice">
          <p>{c.description}</p>
          <p className="muted">
            {c.available ? "Available." : "Coming soon: nothing to configure yet."}
          </p>
        </section>
      )}
    </Loadable>
  );
}
