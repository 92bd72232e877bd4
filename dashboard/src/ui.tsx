// Small shared pieces: loading and error states, copy button, formatting.
import { useState, type ReactNode } from "react";
import type { UseQueryResult } from "@tanstack/react-query";

export function Loadable<T>({
  query,
  label,
  children,
}: {
  query: UseQueryResult<T>;
  label: string;
  children: (data: T) => ReactNode;
}) {
  if (query.isPending)
    return (
      <p className="status" role="status" aria-live="polite">
        <span className="spinner" aria-hidden="true" /> Loading {label}…
      </p>
    );
  if (query.isError)
    return (
      <div className="error" role="alert">
        <p>
          Could not load {label}: {query.error.message}
        </p>
        <button type="button" onClick={() => void query.refetch()}>
          Try again
        </button>
      </div>
    );
  return <>{children(query.data)}</>;
}

export function ErrorNote({ error }: { error: Error | null }) {
  return error ? (
    <p className="error" role="alert">
      {error.message}
    </p>
  ) : null;
}

export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      onClick={() => {
        void navigator.clipboard?.writeText(text).then(() => setCopied(true));
      }}
    >
      {copied ? "Copied" : label}
    </button>
  );
}

export function shortHex(v: string | null, keep = 6): string {
  if (!v) return "—";
  return v.length > keep * 2 + 3 ? `${v.slice(0, keep + 2)}…${v.slice(-keep)}` : v;
}

export function when(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : "never";
}

export function percent(v: number | null): string {
  return v === null ? "—" : `${(v * 100).toFixed(1)}%`;
}
