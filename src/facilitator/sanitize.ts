/**
 * Mechanism and RPC error texts can carry provider URLs (which often embed
 * provider API keys), request bodies and stack-like detail. Before a message
 * leaves the process it is cut to its first meaningful line and stripped of
 * URLs.
 */
const URL_PATTERN = /\b(?:https?|wss?):\/\/[^\s"')]+/gi;
const MAX_LENGTH = 300;

export function sanitizeMessage(message: string | undefined): string | undefined {
  if (!message) return undefined;
  const firstLine = message
    .split("\n")
    .map((l) => l.trim())
    .find((l) => l.length > 0);
  if (!firstLine) return undefined;
  const clean = firstLine.replace(URL_PATTERN, "[url]");
  return clean.length > MAX_LENGTH ? `${clean.slice(0, MAX_LENGTH - 1)}…` : clean;
}

/**
 * A reason is a code. Some mechanisms append their error's text to it
 * ("invalid_exact_evm_transaction_failed: <the RPC error>"), which can carry
 * a provider URL with its key: the code stays the reason, and the text is
 * given back as detail for the message, to be sanitized as one.
 */
export function splitReason(reason: string): { code: string; detail?: string } {
  const colon = reason.indexOf(":");
  if (colon < 0) return { code: reason };
  const detail = reason.slice(colon + 1).trim();
  return { code: reason.slice(0, colon).trim(), ...(detail ? { detail } : {}) };
}
