import { useQuery } from "@tanstack/react-query";
import { api } from "./api.js";
import { Loadable } from "./ui.js";

/**
 * The service sends a sign-in failure as a code (SignInErrorCode in
 * src/features/identity/signIn.ts); each has its own fixed message, and
 * anything else in the URL gets the generic one. No text from the URL is
 * ever shown, so a crafted link cannot put words on this page.
 */
const SIGN_IN_ERRORS: Readonly<Record<string, string>> = {
  cancelled: "Sign-in was cancelled or refused by the provider. You can try again.",
  expired: "This sign-in expired or was started in another browser. Please start again.",
  unknown_provider: "That sign-in option is not available. Choose one below.",
  provider_unreachable: "The sign-in provider could not be reached. Try again shortly.",
  rejected: "The sign-in provider's answer could not be verified. Please start again.",
};
const SIGN_IN_FAILED = "Sign-in did not complete. Please try again.";

function signInErrorMessage(code: string | null): string | undefined {
  if (code === null) return undefined;
  return Object.hasOwn(SIGN_IN_ERRORS, code) ? SIGN_IN_ERRORS[code] : SIGN_IN_FAILED;
}

export function SignInPage({ returnTo }: { returnTo: string }) {
  const providers = useQuery({
    queryKey: ["providers"],
    queryFn: () => api<{ providers: { id: string; label: string }[] }>("/auth/providers"),
  });
  const error = signInErrorMessage(new URLSearchParams(location.search).get("signInError"));
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
