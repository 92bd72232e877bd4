/**
 * One settle in flight per payer and network. A payer funded for one
 * payment that signs twenty-five and sends them together would otherwise
 * have all twenty-five pass the cooling check and the simulation (none sees
 * the others) and twenty-four revert at our gas. With one lane per payer the
 * second runs only once the first's outcome is recorded: it then meets the
 * first's cooling, or a simulation that sees the first's transfer, so one
 * payer causes at most one failure per cooling period however concurrent.
 *
 * Within a process the lane is a queue (first come, first served). Across
 * replicas it is a Redis key taken with SET NX and a lease as long as a
 * settle may last, when Redis is configured (production with more than one
 * replica requires it: see config). If Redis cannot be reached the lane
 * holds within this process only, and says so in the log: settles go on.
 *
 * A payer's lane is bounded: past `maxWaiting` queued settles, or after
 * waiting `maxWaitMs`, a settle is refused before anything is sent
 * (`payer_settlement_in_flight`), so a payer cannot hold a merchant's
 * request for ever. Copies of a payment already in the lane (the same
 * authorization, sent again by a retrying server) queue without counting
 * against that bound: each is answered from the first's record as soon as
 * its turn comes, as a duplicate, so fifty copies of one payment still get
 * one success and forty-nine duplicates. Operations with no payer (a batch
 * `settle`, `claim` or `refund`) take no lane.
 */
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { Logger } from "../../lib/logger.js";

/** Why a settle was not let into its payer's lane. */
export type LaneRefusal = "queue_full" | "waited_too_long";

export interface PayerLaneOptions {
  /** Settles that may wait behind the one in flight, per payer. */
  maxWaiting: number;
  /** How long a settle waits for its turn before it is refused. */
  maxWaitMs: number;
  /** How long a replica's hold on a payer lasts if it dies holding it. */
  leaseMs: number;
  redis?: Redis | undefined;
  log?: Logger | undefined;
}

interface Lane {
  tail: Promise<void>;
  queued: number;
  /** The payments queued or running, by authorization key, with how many copies each. */
  payments: Map<string, number>;
}

/** Deletes the key only while it still holds our token (the lease may have passed on). */
const RELEASE = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`;

const POLL_MS = 50;

export class PayerLanes {
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly opts: PayerLaneOptions) {}

  /** Settles queued or running in this process, over every payer (tests and metrics). */
  get size(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.queued;
    return n;
  }

  /**
   * Runs `fn` once it is the payer's only settle in flight; answers
   * `refuse(why)` instead when the lane is full or the wait too long.
   */
  async run<T>(
    key: string,
    fn: () => Promise<T>,
    refuse: (why: LaneRefusal) => T,
    payment?: string,
  ): Promise<T> {
    const lane = this.lanes.get(key) ?? {
      tail: Promise.resolve(),
      queued: 0,
      payments: new Map<string, number>(),
    };
    const copies = payment === undefined ? 0 : (lane.payments.get(payment) ?? 0);
    if (copies === 0 && this.distinct(lane) > this.opts.maxWaiting) return refuse("queue_full");
    this.lanes.set(key, lane);
    lane.queued += 1;
    if (payment !== undefined) lane.payments.set(payment, copies + 1);
    const before = lane.tail;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    // The next in line waits for this settle and everything before it.
    lane.tail = before.then(() => mine);
    const deadline = Date.now() + this.opts.maxWaitMs;
    try {
      if (!(await settlesBy(before, deadline))) {
        // Our place in the queue still passes on in turn.
        void before.then(done);
        return refuse("waited_too_long");
      }
      const release = await this.holdShared(key, deadline);
      if (release === false) {
        done();
        return refuse("waited_too_long");
      }
      try {
        return await fn();
      } finally {
        done();
        await release?.();
      }
    } finally {
      lane.queued -= 1;
      if (payment !== undefined) {
        const left = (lane.payments.get(payment) ?? 1) - 1;
        if (left > 0) lane.payments.set(payment, left);
        else lane.payments.delete(payment);
      }
      if (lane.queued === 0 && this.lanes.get(key) === lane) this.lanes.delete(key);
    }
  }

  /** Settles in the lane, copies of one payment counted once. */
  private distinct(lane: Lane): number {
    let copies = 0;
    for (const n of lane.payments.values()) copies += n - 1;
    return lane.queued - copies;
  }

  /**
   * Takes the payer's key in Redis, waiting for another replica's settle to
   * end. Resolves to its release, undefined without Redis (or when it cannot
   * be reached), or false when the deadline passed first.
   */
  private async holdShared(
    key: string,
    deadline: number,
  ): Promise<(() => Promise<void>) | undefined | false> {
    const redis = this.opts.redis;
    if (!redis) return undefined;
    const name = `x402:payer-lane:${key}`;
    const token = randomUUID();
    try {
      for (;;) {
        const taken = await redis.set(name, token, "PX", this.opts.leaseMs, "NX");
        if (taken === "OK") {
          return async () => {
            await redis.eval(RELEASE, 1, name, token).catch(() => undefined);
          };
        }
        if (Date.now() + POLL_MS > deadline) return false;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    } catch (e) {
      this.opts.log?.warn(
        { err: e instanceof Error ? e.message : String(e) },
        "payer lanes: redis unreachable, one settle per payer holds in this process only",
      );
      return undefined;
    }
  }
}

/** Whether `p` settles before `deadline`. */
async function settlesBy(p: Promise<void>, deadline: number): Promise<boolean> {
  const ms = deadline - Date.now();
  if (ms <= 0) return false;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([p.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
