import { useState, type FormEvent } from "react";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api } from "../api.js";
import { ErrorNote, Loadable, shortHex, when } from "../ui.js";
import type { DayCheck } from "../../../src/features/confidential/credits.js";
import {
  cancelCall,
  challengeCall,
  redeemCall,
  type ConfidentialReceipt,
  type VaultCall,
} from "../../../src/clients/confidential/receipts.js";

type Mode = "default" | "confidential" | "both";

interface ConfidentialInfo {
  available: boolean;
  network: string;
  contractAddress: string;
  configured: boolean;
  enabled: boolean;
  mode: Mode;
  merchantAddress: string;
  slot: string | null;
  enabledAt: string | null;
  /** The address the slot's pending credit and balance are also readable by (null: none). */
  viewer: string | null;
  fee: { unitsPerSettlement: number; explanation: string };
  description: string;
  observer: string;
  /** Which keys are still trusted, and for what. */
  trust: string;
  /** On the devnet: what its contract lacks (null elsewhere). */
  devnet: string | null;
}
interface Balance {
  available: string | null;
  availableError: string | null;
  pending: string;
}
interface ReceiptEntry {
  paymentNonce: string;
  payer: string;
  amount: string;
  transaction: string | null;
  state:
    | "settling"
    | "pending"
    | "available"
    | "redeemed"
    | "returned"
    | "bond_paid"
    | "unbacked"
    | "failed";
  createdAt: string;
  day: string | null;
  creditedDay: string | null;
  redeemableFrom: string | null;
  problem: string | null;
  receipt: ConfidentialReceipt | null;
}
interface WithdrawalEntry {
  id: string;
  onchainId: string | null;
  amount: string;
  state: string;
  paidAmount: string | null;
  finalizeTransaction: string | null;
  error: string | null;
  createdAt: string;
}

/** The browser wallet (EIP-1193): the merchant's own keys sign, never ours. */
interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}
function wallet(): Eip1193 {
  const eth = (window as unknown as { ethereum?: Eip1193 }).ethereum;
  if (!eth) {
    throw new Error(
      "No browser wallet was found. Open this page in a browser with a wallet extension holding the keys of your withdrawal address.",
    );
  }
  return eth;
}
async function walletAddress(): Promise<string> {
  const accounts = (await wallet().request({ method: "eth_requestAccounts" })) as string[];
  if (!accounts[0]) throw new Error("The wallet shared no account.");
  return accounts[0];
}
/**
 * Has the connected wallet send `call` itself (it pays the gas). Every call
 * is built in this page from receipts and ids (src/clients/confidential/
 * receipts.ts): no answer of ours carries calldata. `from`, when given, is
 * the only account the contract takes it from (a cancellation).
 */
async function sendFromWallet(call: VaultCall, from?: string): Promise<string> {
  const address = await walletAddress();
  if (from && address.toLowerCase() !== from.toLowerCase()) {
    throw new Error(`Switch your wallet to the withdrawal address ${from} first.`);
  }
  return (await wallet().request({
    method: "eth_sendTransaction",
    params: [{ from: address, to: call.to, data: call.data }],
  })) as string;
}
function utf8Hex(text: string): string {
  return `0x${Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join("")}`;
}
/** USDC has 6 decimals: "1.5" → "1500000". */
function toAtomic(usdc: string): string {
  const m = /^(\d+)(?:\.(\d{0,6}))?$/.exec(usdc.trim());
  if (!m) throw new Error("Enter an amount in USDC, for example 12.50 (at most 6 decimals).");
  const atomic = BigInt(m[1]!) * 1_000_000n + BigInt((m[2] ?? "").padEnd(6, "0"));
  if (atomic <= 0n) throw new Error("Enter an amount above zero.");
  return atomic.toString();
}
function usdc(atomic: string | null): string {
  if (atomic === null) return "—";
  const v = BigInt(atomic);
  return `${v / 1_000_000n}.${(v % 1_000_000n).toString().padStart(6, "0")} USDC`;
}

const MODES: { value: Mode; label: string; help: string }[] = [
  { value: "default", label: "Default", help: "The plain offer only." },
  { value: "confidential", label: "Confidential", help: "The private offer only." },
  {
    value: "both",
    label: "Both",
    help: "Both offers in one 402, the confidential one first; clients that cannot pay it pay the plain one.",
  },
];

export function Confidential() {
  const queryClient = useQueryClient();
  const info = useQuery({
    queryKey: ["confidential"],
    queryFn: () => api<ConfidentialInfo>("/api/confidential"),
  });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ["confidential"] });
  const [viewer, setViewer] = useState("");
  const enable = useMutation({
    mutationFn: async () => {
      const address = await walletAddress();
      const { message } = await api<{ message: string }>(
        `/api/confidential/enablement-message?address=${address}`,
      );
      const signature = (await wallet().request({
        method: "personal_sign",
        params: [utf8Hex(message), address],
      })) as string;
      const body = viewer.trim()
        ? { address, signature, viewer: viewer.trim() }
        : { address, signature };
      return api("/api/confidential/enable", { method: "POST", body });
    },
    onSuccess: refresh,
  });
  const setMode = useMutation({
    mutationFn: (mode: Mode) => api("/api/confidential/mode", { method: "POST", body: { mode } }),
    onSuccess: refresh,
  });
  return (
    <Loadable query={info} label="confidential settlement">
      {(c) => (
        <>
          <section className="notice">
            <p>{c.description}</p>
            <p data-testid="confidential-observer">{c.observer}</p>
            <p data-testid="confidential-trust">{c.trust}</p>
            {c.devnet && <p data-testid="confidential-devnet">{c.devnet}</p>}
            {!c.available && (
              <p className="muted">
                Not available on this service: no privacy contract is configured.
              </p>
            )}
          </section>
          {c.available && !c.enabled && (
            <section aria-labelledby="enable-h">
              <h2 id="enable-h">Enable</h2>
              <p data-testid="confidential-fee">
                <strong>Fee:</strong> {c.fee.explanation}
              </p>
              <p>
                Connect the wallet you will withdraw to and sign one message. It must be a wallet
                whose keys you hold: an exchange deposit address cannot sign, and the address can
                never be changed afterwards, by you or by us.
              </p>
              <label htmlFor="viewer-address">Viewer address (optional)</label>
              <input
                id="viewer-address"
                className="mono"
                placeholder="0x…"
                value={viewer}
                onChange={(e) => setViewer(e.target.value)}
              />
              <p className="muted">
                An address whose key only your own checking tools hold, not your withdrawal wallet.
                The contract lets it decrypt your slot&apos;s pending credit and balance, so{" "}
                <code>npm run confidential:check</code> can compare them with your receipts without
                asking us. It is public on-chain and fixed once set.
              </p>
              <button
                type="button"
                className="primary"
                onClick={() => enable.mutate()}
                disabled={enable.isPending}
              >
                {enable.isPending ? "Assigning your encrypted slot…" : "Connect wallet and enable"}
              </button>
              <ErrorNote error={enable.error} />
            </section>
          )}
          {c.enabled && (
            <>
              <section aria-labelledby="status-h">
                <h2 id="status-h">Enabled</h2>
                <dl className="facts">
                  <dt>Withdrawal address</dt>
                  <dd className="mono" data-testid="merchant-address">
                    {c.merchantAddress}
                  </dd>
                  <dt>Network</dt>
                  <dd>{c.network}</dd>
                  <dt>Privacy contract</dt>
                  <dd className="mono" data-testid="confidential-contract">
                    {c.contractAddress}
                  </dd>
                  <dt>Slot</dt>
                  <dd className="mono" data-testid="confidential-slot">
                    {c.slot ?? "being assigned"}{" "}
                    <span className="muted">
                      (with the contract, what your own check needs: npm run confidential:check)
                    </span>
                  </dd>
                  <dt>Viewer</dt>
                  <dd className="mono" data-testid="confidential-viewer">
                    {c.viewer ?? "none"}
                  </dd>
                  <dt>Enabled</dt>
                  <dd>{when(c.enabledAt)}</dd>
                  <dt>Fee</dt>
                  <dd>{c.fee.explanation}</dd>
                </dl>
              </section>
              <section aria-labelledby="mode-h">
                <h2 id="mode-h">Offer mode</h2>
                <fieldset>
                  <legend className="sr-only">Offer mode</legend>
                  {MODES.map((m) => (
                    <label key={m.value} className="check">
                      <input
                        type="radio"
                        name="offer-mode"
                        value={m.value}
                        checked={c.mode === m.value}
                        disabled={setMode.isPending}
                        onChange={() => setMode.mutate(m.value)}
                      />
                      <strong>{m.label}</strong> <span className="muted">{m.help}</span>
                    </label>
                  ))}
                </fieldset>
                <ErrorNote error={setMode.error} />
              </section>
              <BalanceView />
              <DayChecks vault={c.contractAddress} />
              <Receipts vault={c.contractAddress} />
              <Withdrawals vault={c.contractAddress} />
            </>
          )}
        </>
      )}
    </Loadable>
  );
}

function BalanceView() {
  const balance = useQuery({
    queryKey: ["confidential-balance"],
    queryFn: () => api<Balance>("/api/confidential/balance"),
    refetchInterval: 10_000,
  });
  return (
    <section aria-labelledby="balance-h">
      <h2 id="balance-h">Balance</h2>
      <Loadable query={balance} label="the balance">
        {(b) => (
          <dl className="facts">
            <dt>Available</dt>
            <dd data-testid="balance-available">
              {b.available === null ? (b.availableError ?? "—") : usdc(b.available)}
            </dd>
            <dt>Pending</dt>
            <dd data-testid="balance-pending">
              {usdc(b.pending)}{" "}
              <span className="muted">
                (spendable once its day is closed and, after its challenge window, released)
              </span>
            </dd>
          </dl>
        )}
      </Loadable>
    </section>
  );
}

/**
 * A short day's receipts all presented leaves nothing to send: the day is
 * either awaiting the contract's check of them or (disputed) its shortfall
 * paid from the bond, which is what the merchant needs to read rather than
 * "Short" again.
 */
function verdict(e: DayCheck) {
  if (!e.shortfall) return "Matches";
  if (e.unpresented.length > 0 && BigInt(e.paidFromBond) === 0n) return <strong>Short</strong>;
  if (e.phase === "disputed" && BigInt(e.paidFromBond) > 0n) {
    const bounty = BigInt(e.bountyFromBond) > 0n ? ` and a ${usdc(e.bountyFromBond)} bounty` : "";
    return `Challenged: the operator's bond paid the ${usdc(e.paidFromBond)} shortfall${bounty} into your balance`;
  }
  if (e.phase === "disputed") {
    return "Disputed: present your receipts to have any shortfall paid from the operator's bond";
  }
  return "Challenged: waiting for the contract's check of your receipts";
}

/**
 * Each closed day still in its challenge window: the slot's credit as the
 * contract holds it against the day's receipts. On a shortfall one action
 * sends the challenge, built here from the receipts; the contract checks
 * that each opens its payment's commitment to your slot and pays the
 * shortfall from the operator bond once the KMS has answered.
 */
function DayChecks({ vault }: { vault: string }) {
  const queryClient = useQueryClient();
  const days = useQuery({
    queryKey: ["confidential-days"],
    queryFn: () => api<{ days: DayCheck[] }>("/api/confidential/days"),
    refetchInterval: 30_000,
  });
  const challenge = useMutation({
    mutationFn: (receipts: ConfidentialReceipt[]) =>
      sendFromWallet(challengeCall(vault as `0x${string}`, receipts)),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["confidential-days"] }),
  });
  return (
    <section aria-labelledby="days-h">
      <h2 id="days-h">Check each day</h2>
      <p className="muted">
        After a day closes, its credits wait out a challenge window before they become available.
        Here each such day's credit to you, as the contract holds it, is compared with your
        receipts. If it falls short, challenge it from your wallet: the contract checks that each
        receipt opens the commitment it stored for the payment when it collected it, and pays the
        shortfall from the operator's bond into your balance, with a bounty while the bond has
        enough to spare. The challenge names your slot, these payments and the account that sends it
        on-chain (switch your wallet to another funded account to keep your withdrawal address off
        it), and reveals your credit for that day; anyone holding your receipts may send it for you.
      </p>
      <ErrorNote error={challenge.error} />
      <Loadable query={days} label="the days">
        {(d) =>
          d.days.length === 0 ? (
            <p className="empty">No day of your receipts is in its challenge window.</p>
          ) : (
            <table className="days">
              <thead>
                <tr>
                  <th scope="col">Day</th>
                  <th scope="col">Credit</th>
                  <th scope="col">Receipts</th>
                  <th scope="col">Verdict</th>
                </tr>
              </thead>
              <tbody>
                {d.days.map((e) => (
                  <tr key={e.day} data-testid={`day-${e.day}`}>
                    <td>{e.day}</td>
                    <td>{e.phase === "disputed" ? "disputed" : usdc(e.credit)}</td>
                    <td>
                      {e.receipts} = {usdc(e.receiptsTotal)}
                    </td>
                    <td>
                      {verdict(e)}
                      {e.phase === "closed" && e.windowEndsAt && (
                        <span className="muted"> (challengeable until {when(e.windowEndsAt)})</span>
                      )}{" "}
                      {e.unpresented.length > 0 && (
                        <button
                          type="button"
                          onClick={() => challenge.mutate(e.unpresented)}
                          disabled={challenge.isPending}
                        >
                          Challenge from my wallet
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Loadable>
    </section>
  );
}

function Receipts({ vault }: { vault: string }) {
  const queryClient = useQueryClient();
  // Older pages: each starts before the oldest receipt shown so far.
  const [pages, setPages] = useState<string[]>([]);
  const receipts = useQuery({
    queryKey: ["confidential-receipts", pages],
    queryFn: async () => {
      const all: ReceiptEntry[] = [];
      for (const before of [undefined, ...pages]) {
        const q = before ? `?before=${encodeURIComponent(before)}` : "";
        all.push(
          ...(await api<{ receipts: ReceiptEntry[] }>(`/api/confidential/receipts${q}`)).receipts,
        );
      }
      return { receipts: all };
    },
    refetchInterval: 5_000,
  });
  const redeem = useMutation({
    mutationFn: (receipt: ConfidentialReceipt) =>
      sendFromWallet(redeemCall(vault as `0x${string}`, receipt)),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["confidential-balance"] }),
  });
  const now = Date.now();
  return (
    <section aria-labelledby="receipts-h">
      <h2 id="receipts-h">Receipts</h2>
      <p className="muted">
        Each receipt opens the commitment the contract stored, when it collected the payment, to
        your slot: nobody signs it, and no other slot can ever claim that payment. Payments become
        available once their day is closed (normally just after 00:00 UTC) and, after its challenge
        window, released. If a day is still not closed a day after it ended, or is disputed, your
        wallet can redeem its receipts on the contract itself, without us: the redemption names your
        slot, the payment and the sending account on-chain.
      </p>
      <ErrorNote error={redeem.error} />
      <Loadable query={receipts} label="the receipts">
        {(r) =>
          r.receipts.length === 0 ? (
            <p className="empty">No confidential payments yet.</p>
          ) : (
            <div className="scroll">
              <table className="receipts">
                <thead>
                  <tr>
                    <th scope="col">Paid</th>
                    <th scope="col">Payer</th>
                    <th scope="col">Amount</th>
                    <th scope="col">State</th>
                    <th scope="col">Receipt</th>
                  </tr>
                </thead>
                <tbody>
                  {r.receipts.map((e) => (
                    <tr key={e.paymentNonce}>
                      <td>{when(e.createdAt)}</td>
                      <td className="mono">{shortHex(e.payer)}</td>
                      <td>{usdc(e.amount)}</td>
                      <td>
                        <span className={`pill ${e.state}`}>{e.state}</span>
                        {e.creditedDay && <div className="muted">batch {e.creditedDay}</div>}
                        {e.problem && <div className="muted">{e.problem}</div>}
                        {e.state === "pending" &&
                          e.receipt &&
                          e.redeemableFrom &&
                          Date.parse(e.redeemableFrom) <= now && (
                            <button
                              type="button"
                              onClick={() => e.receipt && redeem.mutate(e.receipt)}
                              disabled={redeem.isPending}
                            >
                              Redeem from my wallet
                            </button>
                          )}
                      </td>
                      <td>
                        {e.receipt ? (
                          <details>
                            <summary className="mono">{shortHex(e.receipt.commitment)}</summary>
                            <pre>{JSON.stringify(e.receipt, null, 2)}</pre>
                          </details>
                        ) : (
                          "—"
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {r.receipts.length > 0 && r.receipts.length % 100 === 0 && (
                <button
                  type="button"
                  onClick={() => setPages([...pages, r.receipts.at(-1)!.createdAt])}
                >
                  Older receipts
                </button>
              )}
            </div>
          )
        }
      </Loadable>
    </section>
  );
}

function Withdrawals({ vault }: { vault: string }) {
  const queryClient = useQueryClient();
  const list = useQuery({
    queryKey: ["confidential-withdrawals"],
    queryFn: () => api<{ withdrawals: WithdrawalEntry[] }>("/api/confidential/withdrawals"),
    refetchInterval: 5_000,
  });
  const [amount, setAmount] = useState("");
  const withdraw = useMutation({
    mutationFn: async () => {
      const atomic = toAtomic(amount);
      const address = await walletAddress();
      const { typedData } = await api<{ typedData: unknown }>(
        "/api/confidential/withdrawals/request",
        { method: "POST", body: { amount: atomic } },
      );
      const signature = (await wallet().request({
        method: "eth_signTypedData_v4",
        params: [address, JSON.stringify(typedData)],
      })) as string;
      return api<WithdrawalEntry>("/api/confidential/withdrawals", {
        method: "POST",
        body: { typedData, signature },
      });
    },
    onSuccess: () => {
      setAmount("");
      void queryClient.invalidateQueries({ queryKey: ["confidential-withdrawals"] });
    },
  });
  const cancel = useMutation({
    mutationFn: async (id: string) => {
      const { from, withdrawalId } = await api<{ from: string; withdrawalId: string }>(
        `/api/confidential/withdrawals/${id}/cancel`,
        { method: "POST" },
      );
      return sendFromWallet(cancelCall(vault as `0x${string}`, BigInt(withdrawalId)), from);
    },
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["confidential-balance"] }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    withdraw.mutate();
  };
  const now = Date.now();
  return (
    <section aria-labelledby="withdraw-h">
      <h2 id="withdraw-h">Withdraw</h2>
      <p className="muted">
        Only the available balance can be withdrawn; payments still pending their batch cannot. An
        amount above it moves nothing. Either way the chain shows the amount, your slot and
        withdrawal address, and whether your balance covered it, but not the balance itself. We pay
        the gas. If a withdrawal is not finalized within 24 hours, your wallet can cancel it here
        and the amount returns to your balance.
      </p>
      <form className="stack-form" onSubmit={submit}>
        <label htmlFor="withdraw-amount">Amount (USDC)</label>
        <input
          id="withdraw-amount"
          inputMode="decimal"
          required
          value={amount}
          onChange={(e) => setAmount(e.target.value)}
          placeholder="10.00"
        />
        <div className="row">
          <button type="submit" className="primary" disabled={withdraw.isPending}>
            {withdraw.isPending ? "Withdrawing…" : "Sign and withdraw"}
          </button>
        </div>
      </form>
      <ErrorNote error={withdraw.error} />
      <ErrorNote error={cancel.error} />
      <Loadable query={list} label="the withdrawals">
        {(w) =>
          w.withdrawals.length === 0 ? (
            <p className="empty">No withdrawals yet.</p>
          ) : (
            <div className="scroll">
              <table className="withdrawals">
                <thead>
                  <tr>
                    <th scope="col">Requested</th>
                    <th scope="col">Amount</th>
                    <th scope="col">State</th>
                    <th scope="col">Paid</th>
                  </tr>
                </thead>
                <tbody>
                  {w.withdrawals.map((e) => (
                    <tr key={e.id}>
                      <td>{when(e.createdAt)}</td>
                      <td>{usdc(e.amount)}</td>
                      <td>
                        <span className={`pill ${e.state}`}>{e.state}</span>
                        {e.state === "finalized" && e.paidAmount === "0" && (
                          <div className="muted">
                            The available balance did not cover it: nothing moved.
                          </div>
                        )}
                        {e.error && <div className="muted">{e.error}</div>}
                        {e.state === "debited" &&
                          now - Date.parse(e.createdAt) > 24 * 3_600_000 && (
                            <button
                              type="button"
                              onClick={() => cancel.mutate(e.id)}
                              disabled={cancel.isPending}
                            >
                              Cancel from my wallet
                            </button>
                          )}
                      </td>
                      <td>{usdc(e.paidAmount)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )
        }
      </Loadable>
    </section>
  );
}
