// The one-click checks of each pipeline (the request's `checks`, `grad_orders`,
// `grad_modes`; docs/api.md#checks): what they are in the page's state, how they go into
// a request and come back from a stored one. The box that ticks them: controls/checks-box.ts.
import * as z from "zod/mini";
import { RunRequest } from "../generated/request";
import { parsedOrNull } from "../util/narrow";

export type CheckName = NonNullable<RunRequest["checks"]>[number];
export type GradMode = NonNullable<RunRequest["grad_modes"]>[number];

/** The checks, in the server's order (sandbox/protocol/checks.py), with what each does. */
/** `cost`: the median ratio to the plain run over 61 programs (docs/api.md, "What the
 * understanding outputs cost": benchmarks/engine/understanding_cost.py on a quiet machine). */
export const CHECK_TOGGLES: { name: CheckName; label: string; help: string; cost: string }[] = [
  { name: "nans", label: "NaNs", help: "run under jax_debug_nans: the first operation that made a NaN, at its line", cost: "×1.03 the run" },
  { name: "infs", label: "Infs", help: "run under jax_debug_infs: the first operation that made an infinity, at its line", cost: "×1.02 the run" },
  { name: "key_reuse", label: "key reuse", help: "run under jax_debug_key_reuse: a PRNG key used twice, at its second use", cost: "×1.02 the run" },
  { name: "checkify", label: "checkify", help: "checkify with all_checks: out-of-bounds indexing, division by zero, NaNs, each at its line", cost: "×1.37 the run" },
  { name: "grad", label: "grad", help: "jax.test_util.check_grads at the args: how far each derivative is off, and where the custom_jvp/custom_vjp rule is", cost: "×1.76 the run (re-runs the program's derivatives)" },
];
export const GRAD_ORDERS = [1, 2, 3] as const;
export const GRAD_MODES: readonly GradMode[] = ["fwd", "rev"];

/** What the page keeps of the checks: the ticked ones, and the grad check's orders and modes. */
export interface ChecksState {
  names: CheckName[];
  orders: number[];
  modes: GradMode[];
}

export const DEFAULT_CHECKS: ChecksState = { names: [], orders: [1], modes: ["fwd", "rev"] };

const sameItems = (a: readonly unknown[], b: readonly unknown[]): boolean => a.length === b.length && a.every((x) => b.includes(x));

/** The request's fields for `state`: none when nothing is ticked; the grad check's orders
 * and modes only when it is ticked and they are not the server's defaults. */
export function checksRequest(state: ChecksState | undefined): Pick<RunRequest, "checks" | "grad_orders" | "grad_modes"> {
  if (!state || state.names.length === 0) return {};
  const names = CHECK_TOGGLES.map((t) => t.name).filter((n) => state.names.includes(n));
  const fields: Pick<RunRequest, "checks" | "grad_orders" | "grad_modes"> = { checks: names };
  if (names.includes("grad")) {
    const orders = GRAD_ORDERS.filter((o) => state.orders.includes(o));
    const modes = GRAD_MODES.filter((m) => state.modes.includes(m));
    if (orders.length > 0 && !sameItems(orders, DEFAULT_CHECKS.orders)) fields.grad_orders = orders;
    if (modes.length > 0 && !sameItems(modes, DEFAULT_CHECKS.modes)) fields.grad_modes = modes;
  }
  return fields;
}

const Stored = z.object({
  checks: z.optional(z.unknown()),
  grad_orders: z.optional(z.unknown()),
  grad_modes: z.optional(z.unknown()),
});

/** A stored request's checks (a shared link), leniently: what does not parse is left out. */
export function checksFromRequest(data: unknown): ChecksState {
  const d = parsedOrNull(Stored, data) ?? {};
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const names = list(d.checks).flatMap((n) => CHECK_TOGGLES.filter((t) => t.name === n).map((t) => t.name));
  const orders = list(d.grad_orders).filter((o): o is number => GRAD_ORDERS.some((g) => g === o));
  const modes = list(d.grad_modes).flatMap((m) => GRAD_MODES.filter((g) => g === m));
  return {
    names,
    orders: orders.length > 0 ? orders : [...DEFAULT_CHECKS.orders],
    modes: modes.length > 0 ? modes : [...DEFAULT_CHECKS.modes],
  };
}

const Saved = z.object({ names: z.array(z.unknown()), orders: z.array(z.unknown()), modes: z.array(z.unknown()) });

/** The autosave's checks (a ChecksState as saved), or undefined where it holds none. */
export function checksFromSaved(saved: unknown): ChecksState | undefined {
  const s = parsedOrNull(Saved, saved);
  return s === null ? undefined : checksFromRequest({ checks: s.names, grad_orders: s.orders, grad_modes: s.modes });
}
