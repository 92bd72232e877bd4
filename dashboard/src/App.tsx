import { useEffect, useState } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, ApiError, setCsrfToken, type Session } from "./api.js";
import { SignInPage } from "./SignInPage.js";
import { Overview } from "./tabs/Overview.js";
import { Metrics } from "./tabs/Metrics.js";
import { Settlements } from "./tabs/Settlements.js";
import { Plans } from "./tabs/Plans.js";
import { Keys } from "./tabs/Keys.js";
import { Webhooks } from "./tabs/Webhooks.js";
import { Confidential } from "./tabs/Confidential.js";
import { Catalog } from "./tabs/Catalog.js";

const TABS = [
  { id: "overview", label: "Overview" },
  { id: "metrics", label: "Metrics" },
  { id: "settlements", label: "Settlements" },
  { id: "plans", label: "Plans" },
  { id: "keys", label: "API Keys" },
  { id: "webhooks", label: "Webhooks" },
  { id: "confidential", label: "Confidential" },
  { id: "catalog", label: "Catalog" },
] as const;
type TabId = (typeof TABS)[number]["id"];

function tabFromPath(): TabId {
  const segment = location.pathname.replace(/^\/dashboard\/?/, "").split("/")[0];
  return TABS.find((t) => t.id === segment)?.id ?? "overview";
}

export function App() {
  const [tab, setTab] = useState<TabId>(tabFromPath);
  useEffect(() => {
    const onPop = () => setTab(tabFromPath());
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, []);
  const session = useQuery({
    queryKey: ["session"],
    queryFn: async () => {
      try {
        const s = await api<Session>("/api/session");
        setCsrfToken(s.csrfToken);
        return s;
      } catch (e) {
        if (e instanceof ApiError && e.status === 401) return null;
        throw e;
      }
    },
    retry: false,
  });
  const queryClient = useQueryClient();
  const signOut = useMutation({
    mutationFn: () => api("/auth/signout", { method: "POST" }),
    onSuccess: () => {
      queryClient.clear();
      history.replaceState(null, "", "/dashboard/");
      void queryClient.invalidateQueries({ queryKey: ["session"] });
    },
  });
  useEffect(() => {
    const label = TABS.find((t) => t.id === tab)?.label ?? "";
    document.title = `${label} · x402 facilitator`;
  }, [tab]);

  if (session.isPending)
    return (
      <p className="status page" role="status">
        <span className="spinner" aria-hidden="true" /> Loading…
      </p>
    );
  if (session.isError)
    return (
      <div className="error page" role="alert">
        <p>{session.error.message}</p>
        <button type="button" onClick={() => void session.refetch()}>
          Try again
        </button>
      </div>
    );
  if (!session.data) return <SignInPage returnTo={`/dashboard/${tab}`} />;
  const me = session.data;

  const go = (id: TabId) => {
    history.pushState(null, "", `/dashboard/${id}`);
    setTab(id);
  };
  return (
    <div className="shell">
      <header className="top">
        <div className="brand">
          x402 facilitator
          {me.mode === "devnet" && <span className="badge">devnet</span>}
        </div>
        <div className="who">
          <span className="who-name" title={me.account.id}>
            {me.identity?.email ?? me.account.name}
          </span>
          <button type="button" onClick={() => signOut.mutate()} disabled={signOut.isPending}>
            Sign out
          </button>
        </div>
      </header>
      <nav aria-label="Dashboard sections" className="tabs">
        {TABS.map((t) => (
          <a
            key={t.id}
            href={`/dashboard/${t.id}`}
            aria-current={tab === t.id ? "page" : undefined}
            onClick={(e) => {
              e.preventDefault();
              go(t.id);
            }}
          >
            {t.label}
          </a>
        ))}
      </nav>
      <main id="main">
        <h1>{TABS.find((t) => t.id === tab)?.label}</h1>
        {tab === "overview" && <Overview session={me} />}
        {tab === "metrics" && <Metrics />}
        {tab === "settlements" && <Settlements />}
        {tab === "plans" && <Plans />}
        {tab === "keys" && <Keys session={me} />}
        {tab === "webhooks" && <Webhooks />}
        {tab === "confidential" && <Confidential />}
        {tab === "catalog" && <Catalog />}
      </main>
    </div>
  );
}
