// Which leaves a value event describes (docs/api.md "Value pages"): a page of at most
// 4,096 from its `first_leaf`, their data up to a budget of 65,536 elements counted
// from there. The pane says so, and offers the pages before and after and the leaves
// the budget left without data, each as a run with `value_from` set.
import type { EventOf } from "../connection/protocol";

/** The event's page bounds (sandbox/protocol/limits.py MAX_LEAVES, MAX_VALUE_DATA). */
export const MAX_LEAVES = 4096;
export const MAX_VALUE_DATA = 65_536;

export interface ValuePage {
  /** "leaves 1–4,096 of 5,000"; null when the page holds the whole value */
  leaves: string | null;
  /** `value_from` for the leaves before the page and after it (null: none) */
  previous: number | null;
  next: number | null;
  /** the first leaf the data budget left without data (null: none), and its words */
  dataFrom: number | null;
  dataNote: string | null;
}

const count = (n: number): string => n.toLocaleString("en-US");

/** The page a value event is; null for an event without page fields (a worker before
 * value pages) or a value whose leaves and data it holds all. */
export function valuePage(event: Pick<EventOf<"value">, "tree" | "first_leaf" | "total_leaves" | "data_stops_at">): ValuePage | null {
  const total = event.total_leaves;
  if (total === undefined || total === null) return null;
  const first = event.first_leaf ?? 0;
  const end = first + event.tree.length; // one past the page's last leaf
  const stops = event.data_stops_at ?? null;
  const whole = first === 0 && end >= total;
  if (whole && stops === null) return null;
  let leaves: string | null = null;
  if (event.tree.length === 0) leaves = `no leaves from leaf ${count(first + 1)}: the value has ${count(total)} ${total === 1 ? "leaf" : "leaves"}`;
  else if (!whole) leaves = `leaves ${count(first + 1)}–${count(end)} of ${count(total)}`;
  return {
    leaves,
    previous: first > 0 ? Math.max(0, Math.min(first, total) - MAX_LEAVES) : null,
    next: end < total && event.tree.length > 0 ? end : null,
    dataFrom: stops,
    dataNote: stops === null ? null : `leaves ${count(stops + 1)}–${count(end)} without their values: past the ${count(MAX_VALUE_DATA)}-element budget`,
  };
}

/** The words of a leaf left without data: why, and (past the budget) the offer. */
export function missingData(index: number, page: ValuePage | null): string {
  return page?.dataFrom !== null && page?.dataFrom !== undefined && index >= page.dataFrom
    ? `data past the ${count(MAX_VALUE_DATA)}-element budget: show from here`
    : "(too large to send; see the summary)";
}
