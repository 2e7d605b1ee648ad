// The pipeline builder: add, remove and reorder transforms (buttons, keys or drag),
// each with its options as JAX names them.
import { clear, h } from "../util/dom";
import { CHECKPOINT_POLICIES, TRANSFORMS, TRANSFORM_NAMES, describePipeline, optionValue, transformName, type OptionSpec, type Step } from "../model/transforms";

/** The event a pmap step's "as shard_map" button sends (detail: the step's index). */
export const PMAP_TO_SHARD_MAP = "pmap-to-shard-map";

export class PipelineBuilder {
  private steps: Step[] = [];
  private list: HTMLOListElement;
  private summary: HTMLElement;
  private dragFrom: number | null = null;

  constructor(
    readonly root: HTMLElement,
    readonly name: string,
    private readonly onChange: (steps: Step[]) => void,
    private readonly entry: () => string,
  ) {
    this.list = h("ol", { class: "steps", "aria-label": `${name} transforms, applied in order` });
    this.summary = h("code", { class: "pipeline-summary", "data-testid": `summary-${name}` });
    const add = h(
      "select",
      { class: "add-step", "aria-label": `Add a transform to ${name}`, "data-testid": `add-${name}` },
      h("option", { value: "" }, "+ add transform"),
      ...TRANSFORM_NAMES.map((n) => h("option", { value: n }, `${n} — ${TRANSFORMS[n].help}`)),
    );
    add.addEventListener("change", () => {
      const name = transformName(add.value); // null for "+ add transform" itself
      if (name === null) return;
      this.steps = [...this.steps, { name, options: {} }];
      add.value = "";
      this.changed(true);
      // focus the new step, for keyboard users
      (this.list.lastElementChild?.querySelector("button") as HTMLElement | null)?.focus();
      add.focus();
    });
    root.append(h("div", { class: "pipeline-head" }, this.summary, add), this.list);
  }

  get(): Step[] {
    return this.steps;
  }

  set(steps: Step[]): void {
    this.steps = steps.map((s) => ({ name: s.name, options: { ...s.options } }));
    this.render();
  }

  refreshSummary(): void {
    this.summary.textContent = describePipeline(this.steps, this.entry());
  }

  private changed(structural: boolean): void {
    if (structural) this.render();
    else this.refreshSummary();
    this.onChange(this.steps);
  }

  private move(i: number, j: number): void {
    if (j < 0 || j >= this.steps.length || i === j) return;
    const steps = [...this.steps];
    const [s] = steps.splice(i, 1);
    steps.splice(j, 0, s!);
    this.steps = steps;
    this.changed(true);
    (this.list.children[j]?.querySelector(`[data-move="${j < i ? "up" : "down"}"]`) as HTMLElement | null)?.focus();
  }

  private render(): void {
    clear(this.list);
    this.refreshSummary();
    if (this.steps.length === 0) {
      this.list.append(h("li", { class: "step-empty" }, `No transforms: ${this.entry()} as written.`));
      return;
    }
    this.steps.forEach((step, i) => this.list.append(this.renderStep(step, i)));
  }

  private renderStep(step: Step, i: number): HTMLElement {
    const spec = TRANSFORMS[step.name];
    const n = this.steps.length;
    const li = h("li", { class: "step", draggable: "true", "data-step": step.name, "data-index": i });
    li.addEventListener("dragstart", (e) => {
      this.dragFrom = i;
      e.dataTransfer?.setData("text/plain", String(i));
      li.classList.add("dragging");
    });
    li.addEventListener("dragend", () => li.classList.remove("dragging"));
    li.addEventListener("dragover", (e) => e.preventDefault());
    li.addEventListener("drop", (e) => {
      e.preventDefault();
      if (this.dragFrom !== null) this.move(this.dragFrom, i);
      this.dragFrom = null;
    });
    const head = h(
      "div",
      { class: "step-head" },
      h("span", { class: "step-grip", "aria-hidden": "true" }, "⋮⋮"),
      h("strong", { class: "step-name" }, step.name),
      h("span", { class: "step-help" }, spec.help),
      step.name === "pmap"
        ? h("button", {
            type: "button",
            class: "linklike as-shard-map",
            title: "pmap is legacy: replace this step by its shard_map form (a 1-D mesh, shard_map, jit)",
            // main.ts owns the mesh: it listens for this on the builder's root
            onclick: () => this.root.dispatchEvent(new CustomEvent(PMAP_TO_SHARD_MAP, { detail: i, bubbles: true })),
          }, "as shard_map")
        : null,
      h("span", { class: "step-buttons" },
        h("button", { type: "button", class: "icon", "data-move": "up", "aria-label": `Move ${step.name} earlier`, title: "apply earlier (inner)", disabled: i === 0, onclick: () => this.move(i, i - 1) }, "↑"),
        h("button", { type: "button", class: "icon", "data-move": "down", "aria-label": `Move ${step.name} later`, title: "apply later (outer)", disabled: i === n - 1, onclick: () => this.move(i, i + 1) }, "↓"),
        h("button", {
          type: "button",
          class: "icon",
          "aria-label": `Remove ${step.name}`,
          title: "remove",
          onclick: () => {
            this.steps = this.steps.filter((_, k) => k !== i);
            this.changed(true);
          },
        }, "✕"),
      ),
    );
    li.append(head);
    const opts = h("div", { class: "step-options" });
    for (const o of spec.options) opts.append(this.renderOption(step, o));
    li.append(opts);
    return li;
  }

  private renderOption(step: Step, o: OptionSpec): HTMLElement {
    const id = `opt-${this.name}-${Math.random().toString(36).slice(2, 8)}`;
    const current = step.options[o.name];
    if (o.kind === "bool") {
      const box = h("input", { type: "checkbox", id, checked: (current ?? o.jaxDefault) === true, "data-option": o.name });
      box.addEventListener("change", () => {
        step.options[o.name] = box.checked;
        this.changed(false);
      });
      return h("label", { class: "opt opt-bool", for: id, title: o.help }, box, o.name);
    }
    let input: HTMLInputElement | HTMLSelectElement;
    if (o.kind === "policy") {
      input = h("select", { id, "data-option": o.name }, h("option", { value: "" }, "(none: save nothing extra)"), ...CHECKPOINT_POLICIES.map((p) => h("option", { value: p }, p)));
      input.value = typeof current === "string" ? current : "";
    } else {
      input = h("input", {
        id,
        type: "text",
        spellcheck: "false",
        autocomplete: "off",
        placeholder: typeof o.jaxDefault === "string" && o.jaxDefault ? o.jaxDefault : o.kind === "expr" ? "default" : "None",
        value: typeof current === "string" ? current : "",
        "data-option": o.name,
        class: o.kind === "expr" ? "wide" : "",
      });
    }
    const err = h("span", { class: "opt-error", role: "alert" });
    const validate = (): void => {
      try {
        optionValue(o, input.value);
        input.removeAttribute("aria-invalid");
        err.textContent = "";
      } catch (e) {
        input.setAttribute("aria-invalid", "true");
        err.textContent = (e as Error).message;
      }
    };
    input.addEventListener("input", () => {
      step.options[o.name] = input.value;
      validate();
      this.changed(false);
    });
    validate();
    return h("label", { class: `opt opt-${o.kind}`, for: id, title: o.help }, h("span", { class: "opt-name" }, o.name), input, err);
  }
}
