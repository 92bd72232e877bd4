/**
 * The run's history, Jepsen-style: every request sent and the answer it got,
 * every fault injected and every chain event the run caused, in order with
 * their times. The checks read the answers from here (what a resource server
 * was told); a failing run writes it all to a file, beside the seed, so the
 * same scenario can be run again and the history compared.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export interface SentRequest {
  kind: string;
  /** The payment this request presents (one id per signed authorization), if any. */
  payment?: string;
  /** The payment-identifier it carried, if any. */
  paymentIdentifier?: string;
  /** Which account's key sent it. */
  account: number;
  path: string;
}

export interface Answer {
  status: number;
  /** Exactly the body as received, for the verbatim-replay rule. */
  text: string;
  retryAfter: string | null;
  /** The replica that answered, per the balancer. */
  replica: string | null;
  /** Set when the balancer, not the service, answered (a replica died with the request). */
  balancer: string | null;
}

export type HistoryEntry =
  | { at: number; type: "request"; id: number; request: SentRequest }
  | { at: number; type: "answer"; id: number; answer: Answer }
  | { at: number; type: "lost"; id: number; error: string }
  | { at: number; type: "fault"; fault: string; detail: string }
  | {
      at: number;
      type: "payment";
      payment: {
        id: string;
        network: string;
        payer: string;
        payTo: string;
        amount: string;
        /** `upto`: the most the payer authorised (`amount` is what the settle asks). */
        maximum?: string;
      };
    }
  | { at: number; type: "chain"; chain: string; event: string; detail: string };

type Without<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

export class History {
  readonly entries: HistoryEntry[] = [];
  private nextId = 0;
  readonly started = Date.now();

  record(entry: Without<HistoryEntry, "at">): void {
    this.entries.push({ at: Date.now() - this.started, ...entry } as HistoryEntry);
  }

  /** A new request's id, recorded as sent. */
  sent(request: SentRequest): number {
    const id = this.nextId++;
    this.record({ type: "request", id, request });
    return id;
  }

  /** Every request with its answer (or undefined when the connection was lost). */
  exchanges(): { id: number; request: SentRequest; answer: Answer | undefined }[] {
    const answers = new Map<number, Answer>();
    for (const e of this.entries) if (e.type === "answer") answers.set(e.id, e.answer);
    return this.entries.flatMap((e) =>
      e.type === "request" ? [{ id: e.id, request: e.request, answer: answers.get(e.id) }] : [],
    );
  }

  faults(): { fault: string; detail: string }[] {
    return this.entries.flatMap((e) => (e.type === "fault" ? [e] : []));
  }

  write(file: string, header: Record<string, unknown>): void {
    mkdirSync(dirname(file), { recursive: true });
    const lines = [JSON.stringify(header), ...this.entries.map((e) => JSON.stringify(e))];
    writeFileSync(file, `${lines.join("\n")}\n`);
  }
}
