// The checks box, a section of "What to compute" (controls/compute.ts): a box per check
// (model/check-choices.ts says what each is), and the grad check's orders and modes.
import { h } from "../util/dom";
import { CHECK_TOGGLES, GRAD_MODES, GRAD_ORDERS } from "../model/check-choices";

/** The checks box's controls: a box per check, and the grad check's orders and modes
 * (shown only while grad is ticked). */
export interface ChecksBox {
  box: HTMLElement;
  checkBoxes: HTMLInputElement[];
  orderBoxes: HTMLInputElement[];
  modeBoxes: HTMLInputElement[];
  gradOptions: HTMLElement;
}

export function buildChecksBox(): ChecksBox {
  const checkBoxes = CHECK_TOGGLES.map((c) => h("input", { type: "checkbox", "data-check": c.name, id: `check-${c.name}` }));
  const orderBoxes = GRAD_ORDERS.map((o) => h("input", { type: "checkbox", "data-grad-order": o, id: `grad-order-${o}` }));
  const modeBoxes = GRAD_MODES.map((m) => h("input", { type: "checkbox", "data-grad-mode": m, id: `grad-mode-${m}` }));
  const gradOptions = h(
    "div",
    { class: "grad-options", "data-testid": "grad-options", hidden: true },
    "orders ",
    ...GRAD_ORDERS.map((o, i) => h("label", { for: `grad-order-${o}`, title: `check_grads(order=${o}): every order up to ${o}` }, orderBoxes[i]!, String(o))),
    " modes ",
    ...GRAD_MODES.map((m, i) => h("label", { for: `grad-mode-${m}`, title: m === "fwd" ? "forward mode (JVP)" : "reverse mode (VJP)" }, modeBoxes[i]!, m)),
  );
  // a section of "What to compute": each check named, what it does, its cost
  const box = h(
    "fieldset",
    { class: "checks-box", "data-testid": "checks-box" },
    h("legend", { title: "one-click checks of the pipeline, run after its outputs: the Checks tab shows what they found" }, "Checks"),
    ...CHECK_TOGGLES.map((c, i) => computeRow(checkBoxes[i]!, `check-${c.name}`, c.label, c.help, c.cost)),
    gradOptions,
  );
  return { box, checkBoxes, orderBoxes, modeBoxes, gradOptions };
}

/** One row of "What to compute": the box, the output's name, what it is, what it costs. */
export function computeRow(box: HTMLInputElement, id: string, name: string, help: string, cost: string): HTMLLabelElement {
  return h("label", { class: "compute-row", for: id, title: help }, box, h("span", { class: "compute-name" }, name), h("span", { class: "compute-help" }, help), h("span", { class: "compute-cost" }, cost));
}
