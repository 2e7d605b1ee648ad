// The mesh builder: a mesh's shape, axis names and axis types, a PartitionSpec box
// per argument of the entry (named after its parameters) and one for the outputs.
// It edits the page state's `sharding`; model/sharding-studio.ts turns that into the request.
// Where the server offers TPU topologies, "compile for TPU" picks one (`tpu_topology`):
// the mesh is then built over that topology's devices (model/targets.ts).
import { clear, h } from "../util/dom";
import { AXIS_TYPES, SpecError, meshSize, meshToJson, parseSpec, type AxisType, type ShardingState } from "../model/sharding-studio";
import { entrySignature } from "../model/signature";
import { topologyDevices, topologyMesh } from "../model/targets";

export class MeshBuilder {
  private body: HTMLElement;
  private enabled: HTMLInputElement;
  private state: ShardingState = { mesh: null, inShardings: [], outShardings: "" };
  /** the TPU topologies the server offers, and the one picked ("": none) */
  private topologies: string[] = [];
  private topology = "";
  /** boxesKey() when the boxes were last drawn */
  private drawnKey = "";
  private topologySelect: HTMLSelectElement;
  private topologyRow: HTMLElement;

  constructor(
    readonly root: HTMLElement,
    /** the code and entry, to name the argument boxes; the run's device count */
    private readonly context: () => { code: string; entry: string; devices: number },
    private readonly onChange: (state: ShardingState) => void,
    private readonly onTopology: (name: string) => void = () => {},
  ) {
    this.enabled = h("input", { type: "checkbox", id: "mesh-on", "data-testid": "mesh-on" });
    this.enabled.addEventListener("change", () => {
      this.state.mesh = this.enabled.checked ? { shape: "2, 2", names: "x, y", types: ["auto", "auto"] } : null;
      this.changed(true);
    });
    this.body = h("div", { class: "mesh-body" });
    this.topologySelect = h("select", { id: "tpu-topology", "data-testid": "tpu-topology", title: "tpu_topology: compile for this TPU slice without a TPU (libtpu); the mesh is over its devices; nothing runs" });
    this.topologySelect.addEventListener("change", () => this.pickTopology(this.topologySelect.value));
    this.topologyRow = h("label", { for: "tpu-topology", class: "mesh-topology", hidden: true }, "compile for TPU ", this.topologySelect);
    root.append(h("label", { for: "mesh-on", title: "run over a device mesh: jax.make_mesh, shardings on the arguments and outputs" }, this.enabled, " a device mesh"), this.topologyRow, this.body);
    this.render();
  }

  /** The TPU topologies the server offers (GET /api/v1/backends); none: no choice shown. */
  setTopologies(names: string[]): void {
    this.topologies = names;
    this.renderTopologies();
  }

  /** The page state's topology (a snippet, the autosave); "": none. */
  setTopology(name: string): void {
    this.topology = name;
    this.renderTopologies();
    this.check();
  }

  private renderTopologies(): void {
    // one from a link that this server does not offer stays listed: the run says so (422)
    const names = this.topology && !this.topologies.includes(this.topology) ? [...this.topologies, this.topology] : this.topologies;
    const label = (n: string): string => (this.topologies.includes(n) ? `${n} (no TPU needed)` : `${n} (not offered here)`);
    this.topologySelect.replaceChildren(h("option", { value: "" }, "no: the run's devices"), ...names.map((n) => h("option", { value: n }, label(n))));
    this.topologySelect.value = this.topology;
    this.topologyRow.hidden = names.length === 0;
  }

  private pickTopology(name: string): void {
    this.topology = name;
    // a topology needs a mesh over its devices: one is proposed from its sizes
    const proposed = name && this.state.mesh === null ? topologyMesh(name) : null;
    if (proposed) {
      const auto: AxisType = "auto";
      this.state.mesh = { ...proposed, types: proposed.names.split(", ").map(() => auto) };
    }
    this.onTopology(name);
    this.changed(true);
  }

  set(state: ShardingState | undefined): void {
    this.state = structuredClone(state ?? { mesh: null, inShardings: [], outShardings: "" });
    this.render();
  }

  /** The entry, code or devices changed: the argument boxes follow its parameters.
   * Redrawn only when the boxes would differ: a redraw replaces the inputs, and text
   * typed into one that is being replaced would be lost. */
  refresh(): void {
    if (this.boxesKey() === this.drawnKey) this.check();
    else this.render();
  }

  /** What the argument boxes depend on: the mesh's axes and the entry's parameters. */
  private boxesKey(): string {
    const { code, entry } = this.context();
    const params = entrySignature(code, entry)?.params.map((p) => p.name) ?? [];
    return JSON.stringify([this.state.mesh, params, this.state.inShardings.length]);
  }

  private changed(rerender: boolean): void {
    this.onChange(structuredClone(this.state));
    if (rerender) this.render();
    else this.check();
  }

  private render(keepFocus = true): void {
    // the box being typed into keeps the focus and caret across a redraw from elsewhere
    const active = document.activeElement;
    const focused = keepFocus && active instanceof HTMLInputElement && this.body.contains(active) ? { id: active.id, start: active.selectionStart, end: active.selectionEnd } : null;
    this.drawnKey = this.boxesKey();
    clear(this.body);
    this.enabled.checked = this.state.mesh !== null;
    this.root.classList.toggle("mesh-active", this.state.mesh !== null);
    const mesh = this.state.mesh;
    if (!mesh) return;
    const field = (id: string, label: string, value: string, help: string, set: (v: string) => void): HTMLElement => {
      const input = h("input", { id, class: "mono", value, spellcheck: "false", autocomplete: "off", title: help, "data-testid": id });
      input.addEventListener("input", () => {
        set(input.value);
        this.changed(false);
      });
      // leaving a box redraws only when the boxes change (new axis names); the focus
      // then goes where the user sent it, not back to this box
      input.addEventListener("change", () => {
        if (this.boxesKey() !== this.drawnKey) this.render(false);
      });
      return h("label", { for: id, class: "mesh-field" }, h("span", {}, label), input);
    };
    this.body.append(
      field("mesh-shape", "shape", mesh.shape, "mesh sizes: 2, 2 (their product: the devices it needs)", (v) => (mesh.shape = v)),
      field("mesh-names", "axis names", mesh.names, "one name per size: x, y", (v) => (mesh.names = v)),
    );
    let axes: string[] = [];
    try {
      axes = meshToJson(mesh).axis_names;
    } catch {
      axes = mesh.names.split(/[,\s]+/).filter(Boolean);
    }
    const types = h("div", { class: "mesh-types" });
    axes.forEach((axis, i) => {
      const select = h("select", { "aria-label": `axis type of ${axis}`, "data-testid": `mesh-type-${i}`, title: "auto: the compiler decides; explicit: shardings in the types; manual: inside shard_map" }, ...AXIS_TYPES.map((t) => h("option", { value: t }, t)));
      select.value = mesh.types[i] ?? "auto";
      select.addEventListener("change", () => {
        mesh.types = axes.map((_, k) => (k === i ? (select.value as AxisType) : (mesh.types[k] ?? "auto")));
        this.changed(false);
      });
      types.append(h("label", {}, h("code", {}, axis), " ", select));
    });
    this.body.append(types);
    const { code, entry } = this.context();
    const params = entrySignature(code, entry)?.params.map((p) => p.name) ?? [];
    const count = Math.max(params.length, this.state.inShardings.length, 1);
    const specs = h("div", { class: "mesh-specs" }, h("span", { class: "mesh-specs-title", title: "PartitionSpec per argument: x, None  or  P('x', None); empty: replicated" }, "in_shardings"));
    for (let i = 0; i < count; i++) {
      specs.append(
        field(`spec-in-${i}`, params[i] ?? `arg ${i}`, this.state.inShardings[i] ?? "", "PartitionSpec of this argument: x, None  or  P('x', None); empty: replicated", (v) => {
          // one box per argument; all empty: in_shardings is not sent
          const list = Array.from({ length: count }, (_, k) => this.state.inShardings[k] ?? "");
          list[i] = v;
          this.state.inShardings = list;
        }),
      );
    }
    specs.append(field("spec-out", "outputs", this.state.outShardings, "PartitionSpec of the outputs (one: for all); empty: the compiler's choice", (v) => (this.state.outShardings = v)));
    this.body.append(specs, h("p", { class: "mesh-problem", role: "status", "aria-live": "polite", "data-testid": "mesh-problem" }));
    const again = focused ? this.body.querySelector<HTMLInputElement>(`#${CSS.escape(focused.id)}`) : null;
    if (again && focused) {
      again.focus();
      again.setSelectionRange(focused.start, focused.end);
    }
    this.check();
  }

  /** Says what does not parse, and whether the run has enough devices. */
  private check(): void {
    const note = this.body.querySelector(".mesh-problem");
    if (!note || !this.state.mesh) return;
    let text = "";
    try {
      const mesh = meshToJson(this.state.mesh);
      const need = meshSize(mesh);
      const { devices } = this.context();
      const onTopology = this.topology ? topologyDevices(this.topology) : null;
      if (onTopology !== null) {
        if (onTopology < need) text = `this mesh needs ${need} devices; TPU ${this.topology} has ${onTopology}`;
      } else if (devices < need) text = `this mesh needs ${need} devices; the run has ${devices}: raise devices (top bar)`;
      for (const spec of this.state.inShardings) parseSpec(spec, mesh.axis_names);
      if (this.state.outShardings) parseSpec(this.state.outShardings, mesh.axis_names);
    } catch (e) {
      text = e instanceof SpecError ? e.message : String(e);
    }
    note.textContent = text;
  }
}
