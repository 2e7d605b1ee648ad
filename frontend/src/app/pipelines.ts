// The pipelines (A, and B in compare mode) and the mesh builder: each edits its part
// of the state. A pmap step turned into its shard_map form (model/pmap.ts) rewrites pipeline
// A and sets the mesh; the mesh builder's TPU topology is a compile target.
import { h } from "../util/dom";
import type { Layout } from "./layout";
import { MeshBuilder } from "../controls/meshbuilder";
import { PMAP_TO_SHARD_MAP, PipelineBuilder } from "../controls/pipeline";
import { pmapAsShardMap } from "../model/pmap";
import { entrySignature } from "../model/signature";
import type { PlayState } from "../model/state";
import type { Targets } from "../model/targets";
import type { PlayStore } from "./store";

type PipelineControls = Pick<Layout, "pipeA" | "pipeB" | "meshHolder" | "compareBtn">;

export interface PipelineHooks {
  /** a TPU topology picked in the mesh builder (a compile target) */
  pickTargets: (targets: Targets) => void;
  /** says something briefly (app/toast.ts) */
  toast: (message: string) => void;
}

export class PipelinesController {
  readonly a: PipelineBuilder;
  readonly b: PipelineBuilder;
  readonly mesh: MeshBuilder;
  private meshTimer = 0;

  constructor(
    private readonly ui: PipelineControls,
    private readonly store: PlayStore,
    hooks: PipelineHooks,
  ) {
    const entry = (): string => store.state.entry || "f";
    this.a = new PipelineBuilder(ui.pipeA, "A", (steps) => ((store.state.steps = steps), store.changed()), entry);
    this.b = new PipelineBuilder(ui.pipeB, "B", (steps) => ((store.state.compare = steps), store.changed()), entry);
    ui.pipeA.prepend(h("h2", { class: "pipeline-title" }, "Pipeline ", h("span", { class: "pipe-a compare-only" }, "A")));
    ui.pipeB.prepend(h("h2", { class: "pipeline-title" }, "Pipeline ", h("span", { class: "pipe-b" }, "B")));
    this.mesh = new MeshBuilder(
      ui.meshHolder,
      () => ({ code: store.state.code, entry: entry(), devices: store.state.devices }),
      (sharding) => ((store.state.sharding = sharding), store.changed()),
      (topology) => hooks.pickTargets({ gpuTarget: topology ? "" : store.state.gpuTarget, tpuTopology: topology }),
    );
    ui.pipeA.addEventListener(PMAP_TO_SHARD_MAP, (e) => {
      const state = store.state;
      const index = (e as CustomEvent<number>).detail;
      const step = state.steps[index];
      if (!step) return;
      const nargs = entrySignature(state.code, entry())?.params.length ?? 1;
      const form = pmapAsShardMap(step, nargs, state.devices);
      state.steps = [...state.steps.slice(0, index), ...form.steps, ...state.steps.slice(index + 1)];
      state.sharding = { mesh: form.mesh, inShardings: [], outShardings: "" };
      this.a.set(state.steps);
      this.mesh.set(state.sharding);
      (ui.meshHolder as HTMLDetailsElement).open = true;
      store.changed();
      hooks.toast(`pmap is now its shard_map form: ${form.note}.`);
    });
    ui.compareBtn.addEventListener("click", () => {
      this.setCompare(store.state.compare === null);
      store.changed();
    });
  }

  /** The argument boxes of the mesh follow the entry's parameters, a moment after typing stops. */
  meshSoon(): void {
    window.clearTimeout(this.meshTimer);
    this.meshTimer = window.setTimeout(() => this.mesh.refresh(), 400);
  }

  /** Compare mode on (pipeline B beside A: `steps`, else B's last, else a copy of A) or off. */
  setCompare(on: boolean, steps?: PlayState["compare"]): void {
    const state = this.store.state;
    state.compare = on ? (steps ?? state.compare ?? structuredClone(state.steps)) : null;
    this.ui.compareBtn.setAttribute("aria-pressed", String(on));
    this.ui.pipeB.hidden = !on;
    document.body.classList.toggle("comparing", on);
    if (on) this.b.set(state.compare!);
  }

  /** The steps of a state shown (its mesh: showMesh). */
  showSteps(state: PlayState): void {
    this.a.set(state.steps);
    this.setCompare(state.compare !== null, state.compare);
  }

  showMesh(state: PlayState): void {
    this.mesh.set(state.sharding);
    if (state.sharding?.mesh) (this.ui.meshHolder as HTMLDetailsElement).open = true;
  }

  /** The pipelines' one-line summaries follow the entry. */
  refreshSummaries(): void {
    this.a.refreshSummary();
    this.b.refreshSummary();
  }
}
