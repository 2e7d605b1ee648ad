// "What to compute": the one control that turns on the outputs a run makes only when
// asked (each costs something: the cost is said beside it, measured) and the checks,
// in the groups of the tab bar (model/tabtable.ts), each named as its tab is. The XLA
// flags and why a compile target refuses an output are said at its foot.
import { buildChecksBox, computeRow, type ChecksBox } from "./checks-box";
import { h } from "../util/dom";
import type { Output } from "../generated/request";
import { GROUP_TITLES, GROUPS } from "../model/tabtable";
import { OUTPUT_PANES, outputTitle } from "../model/registry";

export interface ComputeControl {
  box: HTMLDetailsElement;
  /** one box per opt-in output (`data-output`: its name) */
  outputBoxes: HTMLInputElement[];
  checks: ChecksBox;
  /** why an output is not asked for with the compile target picked */
  targetNote: HTMLElement;
  flags: HTMLInputElement;
  flagsB: HTMLInputElement;
}

export function buildCompute(): ComputeControl {
  const optIn = (Object.keys(OUTPUT_PANES) as Output[]).filter((name) => OUTPUT_PANES[name].optIn);
  const outputBoxes: HTMLInputElement[] = [];
  const checks = buildChecksBox();
  const sections: HTMLElement[] = [];
  for (const g of GROUPS) {
    // in the order of the group's tabs
    const names = g.tabs.flatMap((tab) => optIn.filter((name) => OUTPUT_PANES[name].tab === tab));
    const rows = names.map((name) => {
      const box = h("input", { type: "checkbox", "data-output": name, id: `out-${name}` });
      outputBoxes.push(box);
      const o = OUTPUT_PANES[name].optIn!;
      return computeRow(box, `out-${name}`, outputTitle(name), o.help, o.cost);
    });
    const extra = g.tabs.includes("checks") ? [checks.box] : [];
    if (rows.length + extra.length === 0) continue;
    sections.push(h("fieldset", { class: "compute-group", "data-group": g.id }, h("legend", {}, GROUP_TITLES[g.id].title), ...rows, ...extra));
  }
  const targetNote = h("p", { class: "target-note", "data-testid": "target-note", role: "status", "aria-live": "polite" });
  const flags = h("input", { id: "xla-flags", class: "mono", spellcheck: "false", autocomplete: "off", placeholder: "xla_cpu_enable_fast_math=true", "aria-label": "XLA flags" });
  const flagsB = h("input", { id: "xla-flags-b", class: "mono", spellcheck: "false", autocomplete: "off", placeholder: "(compare: A's)", "aria-label": "XLA flags of pipeline B" });
  const box = h(
    "details",
    { class: "config compute xla-outputs", "data-testid": "compute" },
    h("summary", { title: "the outputs and checks a run makes only when asked, with what each costs" }, "What to compute"),
    h(
      "div",
      { class: "config-body compute-body" },
      h("p", { class: "compute-intro" }, "Always made: jaxpr, StableHLO, HLO, Value, Cost, Timing. Turn on more (costs measured against the plain run):"),
      ...sections,
      targetNote,
      h("label", { class: "xla-flags", title: "compiler_options: name=value, separated by spaces (an allow-list: the server names one it refuses)" }, "XLA flags ", flags),
      h("label", { class: "xla-flags", title: "pipeline B's flags in compare mode (empty: A's); the same pipeline twice compares flags" }, "flags B ", flagsB),
    ),
  );
  return { box, outputBoxes, checks, targetNote, flags, flagsB };
}

/** Opens "What to compute" at `id`'s box and focuses it (an empty pane's "turn it on"). */
export function openComputeAt(control: ComputeControl, id: string): void {
  control.box.open = true;
  const target = control.box.querySelector<HTMLElement>(`#${CSS.escape(id)}`);
  target?.scrollIntoView({ block: "nearest" });
  target?.focus();
}

/** A popover of the top bar (a `details` whose body hangs from its right edge) is
 * moved sideways, when it opens, to lie wholly on screen: the bar wraps at some
 * widths, and a button at its left edge would hang its popover off the window. */
export function keepsOnScreen(box: HTMLDetailsElement, margin = 8): void {
  box.addEventListener("toggle", () => {
    const body = box.querySelector<HTMLElement>(":scope > :not(summary)");
    if (!body || !box.open) return;
    body.style.right = "";
    const rect = body.getBoundingClientRect();
    const shift = Math.max(0, margin - rect.left) - Math.max(0, rect.right - (window.innerWidth - margin));
    if (shift !== 0) body.style.right = `${-shift}px`;
  });
}

/** A popover of the top bar (a `details`) closes on Escape, returning focus to its
 * summary, and on a click outside it: it never stays over the pipeline or the tabs. */
export function closesOutside(box: HTMLDetailsElement): void {
  box.addEventListener("keydown", (e) => {
    if (e.key !== "Escape" || !box.open) return;
    box.open = false;
    box.querySelector("summary")?.focus();
  });
  document.addEventListener("pointerdown", (e) => {
    if (box.open && e.target instanceof Node && !box.contains(e.target)) box.open = false;
  });
}
