/**
 * Label values for metrics that describe client requests. prom-client keeps
 * every label set it has seen for the life of the process, and the request
 * chooses the network and, through its payload, much of the reason; so
 * each label value here comes from a bounded set, and anything else is
 * counted as `other`.
 *
 * - network: one this service serves (fixed at start), else `other`.
 * - result/outcome: the outcomes and protocol reasons this code base
 *   defines; reasons of the families and the official mechanisms (fixed
 *   snake_case strings with known prefixes) up to `maxDynamicReasons`
 *   distinct values per process. A mechanism that ever put free text in a
 *   reason would land in `other` past that cap, not in a new series each.
 */
import { Reason } from "../protocol/reasons.js";

export const OTHER_LABEL = "other";

/** Results and outcomes the payment routes label with besides reasons. */
const OUTCOMES = ["valid", "invalid", "succeeded", "failed"];

/**
 * How the families' and the official mechanisms' reasons begin
 * (`invalid_exact_evm_…`, `invalid_upto_svm_…`, `permit2_…`,
 * `erc20_approval_…`, `transaction_failed`, …).
 */
const REASON_PREFIXES = [
  "invalid_",
  "permit2_",
  "eip2612_",
  "eip6492_",
  "erc20_approval_",
  "unsupported_",
  "unexpected_",
  "insufficient_",
  "transaction_",
  "settlement_",
  "smart_wallet_",
  "confidential_",
  "duplicate_",
];
/** A reason as mechanisms spell them: lower-case snake_case, not too long. */
const REASON_SHAPE = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/;
const MAX_REASON_LENGTH = 96;
const MAX_DYNAMIC_REASONS = 256;

export class RequestLabels {
  private readonly networks: ReadonlySet<string>;
  private readonly known: ReadonlySet<string>;
  /** Prefix-matched reasons admitted so far (bounded by `maxDynamicReasons`). */
  private readonly admitted = new Set<string>();

  constructor(
    servedNetworks: Iterable<string>,
    private readonly maxDynamicReasons = MAX_DYNAMIC_REASONS,
  ) {
    this.networks = new Set(servedNetworks);
    this.known = new Set<string>([...OUTCOMES, ...Object.values(Reason)]);
  }

  network(network: unknown): string {
    return typeof network === "string" && this.networks.has(network) ? network : OTHER_LABEL;
  }

  reason(reason: string): string {
    if (this.known.has(reason) || this.admitted.has(reason)) return reason;
    const plausible =
      reason.length <= MAX_REASON_LENGTH &&
      REASON_SHAPE.test(reason) &&
      REASON_PREFIXES.some((p) => reason.startsWith(p));
    if (!plausible || this.admitted.size >= this.maxDynamicReasons) return OTHER_LABEL;
    this.admitted.add(reason);
    return reason;
  }
}
