/**
 * USD amounts as people write them (`5`, `49.90`, `0.002`) in micro-USD,
 * the unit USDC counts in: at most 6 decimals, nothing else (no signs,
 * exponents or separators), so a price or a top-up means what it says.
 */
import { parseUnits } from "viem";

const USD = /^\d{1,9}(?:\.\d{1,6})?$/;

/** Micro-USD, or undefined when `text` is not such an amount. */
export function microUsdOf(text: string): number | undefined {
  const t = text.trim();
  return USD.test(t) ? Number(parseUnits(t, 6)) : undefined;
}
