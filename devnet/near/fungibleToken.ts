/**
 * A NEP-141 fungible token with NEP-145 storage registration, as the local
 * NEAR ledger runs it for the USDC contract: the same methods, argument
 * formats, deposit rules, panics and `EVENT_JSON` logs as the reference
 * token contracts, so a payment that fails here fails on the chain too.
 */

/** What registering one account costs on USDC (0.00125 NEAR). */
const STORAGE_BALANCE_YOCTO = 1_250_000_000_000_000_000_000n;

export class ContractPanic extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ContractPanic";
  }
}

export interface CallContext {
  predecessor: string;
  deposit: bigint;
  /** View calls may not change state or take deposits. */
  view: boolean;
}

export interface CallResult {
  /** The JSON value returned (undefined: an empty result). */
  value?: unknown;
  logs: string[];
  /** yoctoNEAR to hand back to the predecessor (storage deposit overpaid). */
  refund?: bigint;
}

const U128 = /^\d{1,39}$/;

function parseArgs(raw: Uint8Array): Record<string, unknown> {
  try {
    const value = JSON.parse(Buffer.from(raw).toString("utf8")) as unknown;
    if (value && typeof value === "object" && !Array.isArray(value))
      return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new ContractPanic("Failed to deserialize input from JSON.");
}

function accountArg(args: Record<string, unknown>, name: string): string {
  const v = args[name];
  if (typeof v !== "string" || !/^[a-z0-9._-]{2,64}$/.test(v)) {
    throw new ContractPanic(`Failed to deserialize input from JSON.: missing field \`${name}\``);
  }
  return v;
}

function u128Arg(args: Record<string, unknown>, name: string): bigint {
  const v = args[name];
  // U128 is a JSON string of digits: a number or anything else is refused.
  if (typeof v !== "string" || !U128.test(v) || BigInt(v) >= 2n ** 128n) {
    throw new ContractPanic(
      "Failed to deserialize input from JSON.: invalid type: expected a string of digits",
    );
  }
  return BigInt(v);
}

export class FungibleToken {
  private readonly balances = new Map<string, bigint>();

  constructor(
    readonly accountId: string,
    readonly metadata: { name: string; symbol: string; decimals: number },
  ) {}

  /** Registers an account and credits it (devnet setup). */
  mint(accountId: string, amount: bigint): void {
    this.balances.set(accountId, (this.balances.get(accountId) ?? 0n) + amount);
  }

  register(accountId: string): void {
    if (!this.balances.has(accountId)) this.balances.set(accountId, 0n);
  }

  balanceOf(accountId: string): bigint {
    return this.balances.get(accountId) ?? 0n;
  }

  isRegistered(accountId: string): boolean {
    return this.balances.has(accountId);
  }

  call(method: string, rawArgs: Uint8Array, ctx: CallContext): CallResult {
    const args = parseArgs(rawArgs.length === 0 ? Buffer.from("{}") : rawArgs);
    switch (method) {
      case "ft_metadata":
        return {
          value: { spec: "ft-1.0.0", icon: null, reference: null, ...this.metadata },
          logs: [],
        };
      case "ft_total_supply":
        return {
          value: [...this.balances.values()].reduce((a, b) => a + b, 0n).toString(),
          logs: [],
        };
      case "ft_balance_of":
        return { value: this.balanceOf(accountArg(args, "account_id")).toString(), logs: [] };
      case "storage_balance_bounds":
        return {
          value: {
            min: STORAGE_BALANCE_YOCTO.toString(),
            max: STORAGE_BALANCE_YOCTO.toString(),
          },
          logs: [],
        };
      case "storage_balance_of": {
        const id = accountArg(args, "account_id");
        return {
          value: this.balances.has(id)
            ? { total: STORAGE_BALANCE_YOCTO.toString(), available: "0" }
            : null,
          logs: [],
        };
      }
      case "storage_deposit":
        return this.storageDeposit(args, ctx);
      case "ft_transfer":
        return this.transfer(args, ctx);
      default:
        throw new ContractPanic(`MethodNotFound: ${method}`);
    }
  }

  private storageDeposit(args: Record<string, unknown>, ctx: CallContext): CallResult {
    if (ctx.view) throw new ContractPanic("ProhibitedInView: storage_deposit");
    const id = args["account_id"] === undefined ? ctx.predecessor : accountArg(args, "account_id");
    if (this.balances.has(id)) {
      // Already registered: the whole deposit goes back.
      return {
        value: { total: STORAGE_BALANCE_YOCTO.toString(), available: "0" },
        logs: ["The account is already registered, refunding the deposit"],
        refund: ctx.deposit,
      };
    }
    if (ctx.deposit < STORAGE_BALANCE_YOCTO) {
      throw new ContractPanic("The attached deposit is less than the minimum storage balance");
    }
    this.balances.set(id, 0n);
    return {
      value: { total: STORAGE_BALANCE_YOCTO.toString(), available: "0" },
      logs: [],
      refund: ctx.deposit - STORAGE_BALANCE_YOCTO,
    };
  }

  private transfer(args: Record<string, unknown>, ctx: CallContext): CallResult {
    if (ctx.view) throw new ContractPanic("ProhibitedInView: ft_transfer");
    if (ctx.deposit !== 1n)
      throw new ContractPanic("Requires attached deposit of exactly 1 yoctoNEAR");
    const receiver = accountArg(args, "receiver_id");
    const amount = u128Arg(args, "amount");
    const sender = ctx.predecessor;
    if (sender === receiver) throw new ContractPanic("Sender and receiver should be different");
    if (amount === 0n) throw new ContractPanic("The amount should be a positive number");
    if (!this.balances.has(sender))
      throw new ContractPanic(`The account ${sender} is not registered`);
    if (!this.balances.has(receiver))
      throw new ContractPanic(`The account ${receiver} is not registered`);
    const have = this.balances.get(sender)!;
    if (have < amount) throw new ContractPanic("The account doesn't have enough balance");
    this.balances.set(sender, have - amount);
    this.balances.set(receiver, this.balances.get(receiver)! + amount);
    const memo = typeof args["memo"] === "string" ? { memo: args["memo"] } : {};
    const event = {
      standard: "nep141",
      version: "1.0.0",
      event: "ft_transfer",
      data: [{ old_owner_id: sender, new_owner_id: receiver, amount: amount.toString(), ...memo }],
    };
    return { logs: [`EVENT_JSON:${JSON.stringify(event)}`] };
  }
}
