// The checks box (controls/checks-box.ts) <-> state (model/check-choices.ts): each box read into `state.checks` and written
// back; the grad check's orders and modes shown only while it is ticked.
import { CHECK_TOGGLES, DEFAULT_CHECKS, GRAD_MODES, GRAD_ORDERS, type ChecksState } from "../model/check-choices";
import type { PlayState } from "../model/state";
import type { Binding, Control } from "./bindings";

export interface CheckControls {
  checkBoxes: readonly Control[];
  orderBoxes: readonly Control[];
  modeBoxes: readonly Control[];
  /** the grad check's options (hidden while grad is not ticked) */
  gradOptions?: { hidden: HTMLElement["hidden"] };
}

function current(s: PlayState): ChecksState {
  s.checks ??= structuredClone(DEFAULT_CHECKS);
  return s.checks;
}

/** `list` with `item` in it or not, in `order`'s order. */
function toggled<T>(list: readonly T[], item: T, on: boolean, order: readonly T[]): T[] {
  return order.filter((x) => (x === item ? on : list.includes(x)));
}

export function checksBindings(c: CheckControls): Binding[] {
  const follow = (s: PlayState): void => {
    if (c.gradOptions) c.gradOptions.hidden = !(s.checks?.names.includes("grad") ?? false);
  };
  const names = CHECK_TOGGLES.map((t) => t.name);
  const box = (control: Control, read: (el: Control, checks: ChecksState) => boolean, shown: (checks: ChecksState) => boolean): Binding => ({
    control,
    event: "change",
    read: (el, s) => {
      const ok = read(el, current(s));
      follow(s);
      return ok;
    },
    write: (el, s) => {
      el.checked = shown(s.checks ?? DEFAULT_CHECKS);
      follow(s);
    },
  });
  return [
    ...c.checkBoxes.map((control) => {
      const name = names.find((n) => n === control.dataset.check);
      return box(
        control,
        (el, checks) => name !== undefined && ((checks.names = toggled(checks.names, name, el.checked === true, names)), true),
        (checks) => name !== undefined && checks.names.includes(name),
      );
    }),
    ...c.orderBoxes.map((control) => {
      const order = GRAD_ORDERS.find((o) => String(o) === control.dataset.gradOrder);
      return box(
        control,
        (el, checks) => order !== undefined && ((checks.orders = toggled(checks.orders, order, el.checked === true, GRAD_ORDERS)), true),
        (checks) => order !== undefined && checks.orders.includes(order),
      );
    }),
    ...c.modeBoxes.map((control) => {
      const mode = GRAD_MODES.find((m) => m === control.dataset.gradMode);
      return box(
        control,
        (el, checks) => mode !== undefined && ((checks.modes = toggled(checks.modes, mode, el.checked === true, GRAD_MODES)), true),
        (checks) => mode !== undefined && checks.modes.includes(mode),
      );
    }),
  ];
}
