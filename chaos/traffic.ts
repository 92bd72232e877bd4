/**
 * The chaos run's traffic: resource servers (one API key per account)
 * presenting their payers' payments the way real ones do and the way broken
 * or hostile ones do. Every choice comes from the seeded generator, so a
 * seed names a scenario (the timing of real processes still varies).
 *
 * Kinds of request:
 *   valid            a fresh payment, settled once
 *   concurrent       the same payment sent 3–4 times at once
 *   again-later      a settled payment sent again seconds later (same key)
 *   replay           a settled payment presented by another account's key
 *   identifier       a payment carrying a payment-identifier, then retried with it
 *   retry-pending    the same request again after `settlement_pending`, a 503
 *                    or a connection lost with a killed replica
 *   hostile-body     malformed bodies: they must be refused with a 4xx
 *   hostile-payer    a payer with no funds, or a payment signed for another
 *                    amount or recipient than the one presented
 *   blame-injection  a payment whose payload also names another payer, in a
 *                    field the mechanism does not verify: refused with a 4xx,
 *                    and the named payer is never refused for it
 *   verify           /verify of a fresh payment
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import type { History, SentRequest } from "./history.js";

/** One payment the run made (one signed authorization), for the checks. */
export interface PaymentRecord {
  id: string;
  /** The traffic family (and chain audit) it was made on. */
  family: string;
  network: string;
  payer: string;
  payTo: string;
  asset: string;
  /** What the settle asks: for `upto`, what the request cost, not the maximum signed. */
  amount: bigint;
  /** `upto`: the most the payer authorised. */
  maximum?: bigint;
}

/** What the traffic needs of a chain family. */
export interface TrafficFamily {
  name: string;
  network: string;
  payers: number;
  /**
   * A payment by payer `i` of `amount`, signed as its client signs it.
   * `accepted` is what the payer signed for, when it is not `requirements`
   * (`upto`: a maximum, where the settle asks the amount used).
   */
  pay(
    i: number,
    amount: bigint,
  ): Promise<{
    payload: PaymentPayload;
    requirements: PaymentRequirements;
    accepted?: PaymentRequirements;
    payer: string;
  }>;
  /** Requirements for `amount` to the family's payTo, as a resource server asks. */
  requirements(amount: bigint): Promise<PaymentRequirements>;
  /** A payment from a payer that holds nothing, where the family has one. */
  unfunded?(
    amount: bigint,
  ): Promise<{ payload: PaymentPayload; requirements: PaymentRequirements; payer: string }>;
}

export interface TrafficOptions {
  url: string;
  apiKeys: readonly string[];
  families: readonly TrafficFamily[];
  history: History;
  random: () => number;
}

interface Body {
  x402Version: 2;
  paymentPayload: PaymentPayload;
  paymentRequirements: PaymentRequirements;
}

const REQUEST_TIMEOUT_MS = 120_000;
/**
 * Retries of an open outcome, 2–6 s apart: long enough to outlast a
 * payment-identifier claim a dead process left (taken over after
 * 2 × SETTLE_TIMEOUT_MS + 30 s).
 */
const PENDING_RETRIES = 30;

export class Traffic {
  readonly payments = new Map<string, PaymentRecord>();
  readonly counts: Record<string, number> = {};
  private readonly later: { due: number; run: () => Promise<void> }[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private paymentSeq = 0;

  constructor(private readonly opts: TrafficOptions) {}

  get busy(): number {
    return this.inFlight.size;
  }

  /** Starts one seeded operation (without waiting for it), and whatever retries are due. */
  tick(): void {
    const now = Date.now();
    for (let i = this.later.length - 1; i >= 0; i--) {
      if (this.later[i]!.due <= now) this.track(this.later.splice(i, 1)[0]!.run());
    }
    this.track(this.operation());
  }

  /** Waits for every request in flight, and the retries they scheduled, up to `ms`. */
  async drain(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while ((this.inFlight.size > 0 || this.later.length > 0) && Date.now() < deadline) {
      const now = Date.now();
      for (let i = this.later.length - 1; i >= 0; i--) {
        if (this.later[i]!.due <= now) this.track(this.later.splice(i, 1)[0]!.run());
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  private track(p: Promise<void>): void {
    const tracked = p.catch((e: unknown) => {
      this.opts.history.record({
        type: "fault",
        fault: "traffic-error",
        detail: e instanceof Error ? e.message : String(e),
      });
    });
    this.inFlight.add(tracked);
    void tracked.finally(() => this.inFlight.delete(tracked));
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.opts.random() * items.length)]!;
  }

  private between(lo: number, hi: number): number {
    return lo + Math.floor(this.opts.random() * (hi - lo + 1));
  }

  private count(kind: string): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + 1;
  }

  private async operation(): Promise<void> {
    const r = this.opts.random();
    const family = this.pick(this.opts.families);
    const account = this.between(0, this.opts.apiKeys.length - 1);
    if (r < 0.4) return this.valid(family, account);
    if (r < 0.52) return this.concurrent(family, account);
    if (r < 0.64) return this.identifier(family, account);
    if (r < 0.74) return this.hostileBody(family, account);
    if (r < 0.78) return this.blameInjection(family, account);
    if (r < 0.9) return this.hostilePayer(family, account);
    return this.verify(family, account);
  }

  private async freshPayment(family: TrafficFamily): Promise<{ body: Body; id: string }> {
    const amount = BigInt(this.between(1_000, 99_999));
    const i = this.between(0, family.payers - 1);
    const { payload, requirements, accepted, payer } = await family.pay(i, amount);
    return {
      body: this.remember(family, payload, requirements, payer, accepted),
      id: this.lastId(),
    };
  }

  private remember(
    family: TrafficFamily,
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    payer: string,
    accepted: PaymentRequirements = requirements,
  ): Body {
    const id = `${family.name}#${++this.paymentSeq}`;
    this.payments.set(id, {
      id,
      family: family.name,
      network: family.network,
      payer,
      payTo: requirements.payTo,
      asset: requirements.asset,
      amount: BigInt(requirements.amount),
      ...(accepted !== requirements ? { maximum: BigInt(accepted.amount) } : {}),
    });
    this.opts.history.record({
      type: "payment",
      payment: {
        id,
        network: family.network,
        payer,
        payTo: requirements.payTo,
        amount: requirements.amount,
        ...(accepted !== requirements ? { maximum: accepted.amount } : {}),
      },
    });
    return {
      x402Version: 2,
      paymentPayload: { ...payload, accepted },
      paymentRequirements: requirements,
    };
  }

  private lastId(): string {
    return [...this.payments.keys()].at(-1)!;
  }

  /** Sends a request through the balancer and records it and its answer. */
  async send(
    request: SentRequest,
    body: unknown,
  ): Promise<{ status: number; json: Record<string, unknown> | undefined } | undefined> {
    this.count(request.kind);
    const id = this.opts.history.sent(request);
    try {
      const res = await fetch(`${this.opts.url}${request.path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-api-key": this.opts.apiKeys[request.account]!,
        },
        body: typeof body === "string" ? body : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const text = await res.text();
      this.opts.history.record({
        type: "answer",
        id,
        answer: {
          status: res.status,
          text,
          retryAfter: res.headers.get("retry-after"),
          replica: res.headers.get("x-chaos-replica"),
          balancer: res.headers.get("x-chaos-balancer"),
        },
      });
      let json: Record<string, unknown> | undefined;
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        json = undefined;
      }
      return { status: res.status, json };
    } catch (e) {
      this.opts.history.record({
        type: "lost",
        id,
        error: e instanceof Error ? e.message : String(e),
      });
      return undefined;
    }
  }

  /**
   * Settles `body` once; an answer that leaves the outcome open (pending, a
   * 503, a lost connection) is retried later with the same request, as a
   * resource server that owes its customer an answer does.
   */
  private async settle(
    kind: string,
    body: Body,
    payment: string,
    account: number,
    paymentIdentifier?: string,
    attempt = 0,
  ): Promise<boolean | undefined> {
    const answer = await this.send(
      {
        kind: attempt === 0 ? kind : "retry-pending",
        payment,
        account,
        path: "/settle",
        ...(paymentIdentifier ? { paymentIdentifier } : {}),
      },
      body,
    );
    const open =
      !answer ||
      answer.status === 503 ||
      answer.status === 502 ||
      // A payment-identifier claim still executing: "retry shortly".
      answer.status === 409 ||
      answer.status === 429 ||
      (answer.status === 200 && answer.json?.["errorReason"] === "settlement_pending") ||
      // `upto` names one facilitator account, which only one replica holds
      // at a time: the other refuses, and the client may retry (on it).
      (answer.status === 200 && answer.json?.["errorReason"] === "no_signer_available");
    if (open) {
      if (attempt < PENDING_RETRIES) {
        this.later.push({
          due: Date.now() + this.between(2_000, 6_000),
          run: async () =>
            void (await this.settle(kind, body, payment, account, paymentIdentifier, attempt + 1)),
        });
      }
      return undefined;
    }
    return answer.status === 200 && answer.json?.["success"] === true;
  }

  private async valid(family: TrafficFamily, account: number): Promise<void> {
    const { body, id } = await this.freshPayment(family);
    const settled = await this.settle("valid", body, id, account);
    if (!settled) return;
    const r = this.opts.random();
    if (r < 0.3) {
      this.later.push({
        due: Date.now() + this.between(3_000, 15_000),
        run: async () =>
          void (await this.send(
            { kind: "again-later", payment: id, account, path: "/settle" },
            body,
          )),
      });
    } else if (r < 0.45 && this.opts.apiKeys.length > 1) {
      const other = (account + 1) % this.opts.apiKeys.length;
      await this.send({ kind: "replay", payment: id, account: other, path: "/settle" }, body);
    }
  }

  private async concurrent(family: TrafficFamily, account: number): Promise<void> {
    const { body, id } = await this.freshPayment(family);
    const copies = this.between(3, 4);
    await Promise.all(
      Array.from({ length: copies }, () => this.settle("concurrent", body, id, account)),
    );
  }

  private async identifier(family: TrafficFamily, account: number): Promise<void> {
    const { body, id } = await this.freshPayment(family);
    const pid = `pay_chaos_${id.replace(/\W/g, "_")}_${this.between(0, 1e9)}`;
    const withId: Body = {
      ...body,
      paymentPayload: {
        ...body.paymentPayload,
        extensions: { "payment-identifier": { info: { required: false, id: pid } } },
      } as PaymentPayload,
    };
    const copies = this.between(1, 3);
    await Promise.all(
      Array.from({ length: copies }, () => this.settle("identifier", withId, id, account, pid)),
    );
    this.later.push({
      due: Date.now() + this.between(2_000, 10_000),
      run: async () => void (await this.settle("identifier", withId, id, account, pid)),
    });
  }

  private async hostileBody(family: TrafficFamily, account: number): Promise<void> {
    const requirements = await family.requirements(1_000n);
    const path = this.pick(["/settle", "/verify"]);
    const bodies: unknown[] = [
      "{not json",
      "[]",
      { x402Version: 2 },
      { x402Version: 99, paymentPayload: {}, paymentRequirements: requirements },
      {
        x402Version: 2,
        paymentPayload: { x402Version: 2, payload: 42 },
        paymentRequirements: requirements,
      },
      {
        x402Version: 2,
        paymentPayload: {
          x402Version: 2,
          accepted: requirements,
          payload: { x: "A".repeat(30_000) },
        },
        paymentRequirements: { ...requirements, amount: "-1" },
      },
      {
        x402Version: 2,
        paymentPayload: null,
        paymentRequirements: { ...requirements, network: "eip155:x" },
      },
    ];
    await this.send({ kind: "hostile-body", account, path }, this.pick(bodies));
  }

  private async blameInjection(family: TrafficFamily, account: number): Promise<void> {
    const amount = BigInt(this.between(1_000, 9_999));
    const i = this.between(0, family.payers - 1);
    const j = (i + 1) % Math.max(1, family.payers);
    const { payload, requirements, accepted } = await family.pay(i, amount);
    // The other payer's address, as an attacker would name a victim.
    const victim = (await family.pay(j, 1n)).payer;
    const inner = payload.payload as Record<string, unknown>;
    const body: Body = {
      x402Version: 2,
      paymentPayload: {
        ...payload,
        accepted: accepted ?? requirements,
        payload: { ...inner, payer: victim },
      },
      paymentRequirements: requirements,
    };
    await this.send(
      { kind: "blame-injection", account, path: this.pick(["/settle", "/verify"]) },
      body,
    );
  }

  private async hostilePayer(family: TrafficFamily, account: number): Promise<void> {
    const r = this.opts.random();
    if (r < 0.4 && family.unfunded) {
      const { payload, requirements, payer } = await family.unfunded(
        BigInt(this.between(1_000, 9_999)),
      );
      const body = this.remember(family, payload, requirements, payer);
      await this.settle("hostile-payer", body, this.lastId(), account);
      return;
    }
    // Signed for one payment, presented as another: more to pay, or paid elsewhere.
    const amount = BigInt(this.between(1_000, 9_999));
    const i = this.between(0, family.payers - 1);
    const { payload } = await family.pay(i, amount);
    const presented = await family.requirements(r < 0.7 ? amount * 10n : amount);
    const body: Body = {
      x402Version: 2,
      paymentPayload: { ...payload, accepted: presented },
      paymentRequirements:
        r < 0.7 ? presented : { ...presented, payTo: otherRecipient(presented.payTo) },
    };
    await this.send({ kind: "hostile-payer", account, path: "/settle" }, body);
  }

  private async verify(family: TrafficFamily, account: number): Promise<void> {
    const amount = BigInt(this.between(1_000, 9_999));
    const { payload, requirements, accepted } = await family.pay(
      this.between(0, family.payers - 1),
      amount,
    );
    await this.send(
      { kind: "verify", account, path: "/verify" },
      {
        x402Version: 2,
        paymentPayload: { ...payload, accepted: accepted ?? requirements },
        paymentRequirements: requirements,
      },
    );
  }
}

/** Another recipient written like `payTo`: its last character changed. */
function otherRecipient(payTo: string): string {
  const last = payTo.at(-1)!;
  const swapped = /[0-9]/.test(last) ? (last === "1" ? "2" : "1") : last === "a" ? "b" : "a";
  return `${payTo.slice(0, -1)}${swapped}`;
}
