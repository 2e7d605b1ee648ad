// Compiling for hardware the server does not have (model/targets.ts): one target at a time
// (a GPU picked clears the TPU topology and the other way round), and what the target
// refuses said where it shows: each opt-in box it refuses is disabled with its reason,
// so are the tabs of the outputs it cannot give, and the XLA outputs box says it in words.
import { h } from "../util/dom";
import { Output } from "../generated/request";
import type { Layout } from "./layout";
import { OUTPUT_PANES, optInOutput } from "../model/registry";
import { outputRefusal, type Targets } from "../model/targets";
import type { PlayStore } from "./store";

type TargetControls = Pick<Layout, "gpuTarget" | "gpuTargetLabel" | "targetNote" | "outputBoxes" | "tabs" | "panels">;

/** The GPU menu: the offered targets, and one from a link that this server does not
 * offer (kept listed: the run says so, 422). */
export function gpuChoices(picked: string, offered: readonly string[]): { value: string; label: string }[] {
  const names = picked && !offered.includes(picked) ? [...offered, picked] : [...offered];
  return names.map((n) => ({ value: n, label: offered.includes(n) ? `GPU ${n} (no GPU needed)` : `GPU ${n} (not offered here)` }));
}

export class TargetsController {
  /** the GPU targets the server offers (GET /api/v1/backends) */
  offered: string[] = [];

  constructor(
    private readonly ui: TargetControls,
    private readonly store: PlayStore,
    /** the mesh builder follows the TPU topology */
    private readonly setTopology: (topology: string) => void,
  ) {
    ui.gpuTarget.addEventListener("change", () => {
      const gpu = ui.gpuTarget.value;
      this.pick({ gpuTarget: gpu, tpuTopology: gpu ? "" : this.store.state.tpuTopology });
    });
  }

  /** One target at a time: picking a GPU clears the TPU topology and the other way round. */
  pick(t: Targets): void {
    this.store.state.gpuTarget = t.gpuTarget ?? "";
    this.store.state.tpuTopology = t.tpuTopology ?? "";
    this.show();
    this.store.changed();
  }

  /** The targets in their controls, and why outputs are not asked for with them. */
  show(): void {
    const { ui } = this;
    const state = this.store.state;
    const gpu = state.gpuTarget ?? "";
    const choices = gpuChoices(gpu, this.offered);
    ui.gpuTarget.replaceChildren(h("option", { value: "" }, "this worker"), ...choices.map((c) => h("option", { value: c.value }, c.label)));
    ui.gpuTarget.value = gpu;
    ui.gpuTargetLabel.hidden = choices.length === 0;
    this.setTopology(state.tpuTopology ?? "");
    const targets: Targets = { gpuTarget: gpu, tpuTopology: state.tpuTopology };
    const refused: string[] = [];
    for (const box of ui.outputBoxes) {
      const name = optInOutput(box.dataset.output);
      const why = name === null ? null : outputRefusal(name, targets);
      box.disabled = why !== null;
      box.parentElement?.classList.toggle("refused", why !== null);
      if (why !== null) box.parentElement?.setAttribute("title", why);
      else if (name !== null) box.parentElement?.setAttribute("title", OUTPUT_PANES[name].optIn?.help ?? "");
      if (why !== null && name !== null) refused.push(name);
    }
    for (const name of Output.options) {
      const why = outputRefusal(name, targets);
      const tab = ui.tabs[OUTPUT_PANES[name].tab];
      tab.classList.toggle("refused", why !== null);
      if (why !== null) tab.title = why;
      else tab.removeAttribute("title");
      // its pane says why instead of waiting for an output that will not come (style.css)
      const panel = ui.panels[OUTPUT_PANES[name].tab];
      if (why !== null) panel.dataset.refused = why;
      else delete panel.dataset.refused;
      if (why !== null && OUTPUT_PANES[name].optIn === undefined) refused.push(name);
    }
    const what = gpu ? `GPU ${gpu}` : state.tpuTopology ? `TPU ${state.tpuTopology}` : "";
    ui.targetNote.textContent = what && refused.length ? `compiling for ${what} (without it): no ${refused.join(", ")}, nothing runs` : "";
  }
}
