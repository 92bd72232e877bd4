import { useQuery } from "@tanstack/react-query";
import { api } from "./api.js";
import { Loadable } from "./ui.js";

export function SignInPage({ returnTo }: { returnTo: string }) {
  const providers = useQuery({
    queryKey: ["providers"],
    queryFn: () => api<{ providers: { id: string; label: string }[] }>("/auth/providers"),
  });
  const error = new URLSearchParams(location.search).get("signInError");
  return (
    <main className="signin">
      <h1>Sign in to the x402 facilitator</h1>
      <p>Manage API keys, webhooks, plans and settlements.</p>
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
      <Loadable query={providers} label="sign-in options">
        {(data) =>
          data.providers.length === 0 ? (
            <p className="error" role="alert">
              No identity provider is configured: set AUTH_PROVIDERS (see the README).
            </p>
          ) : (
            <ul className="providers">
              {data.providers.map((p) => (
                <li key={p.id}>
                  <a
                    className="button primary"
                    href={`/auth/signin/${p.id}?returnTo=${encodeURIComponent(returnTo)}`}
                  >
                    Continue with {p.label}
                  </a>
                </li>
              ))}
            </ul>
          )
        }
      </Loadable>
    </main>
  );
}
