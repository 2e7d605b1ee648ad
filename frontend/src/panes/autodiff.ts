// Autodiff: how JAX differentiates the pipeline (sandbox/engine/outputs/autodiff.py). Each
// stage's jaxpr under its path (direct linearization, classic JVP + partial eval +
// transpose) is a tab, shown in a read-only view colour-linked to the code like the
// jaxpr pane; each path's residuals and the checkpoint policies are tables.
import { EditorState } from "@codemirror/state";
import { EditorView, lineNumbers } from "@codemirror/view";
import { clear, h } from "../util/dom";
import { fmtBytes, fmtCount } from "../util/format";
import { highlighting } from "../editor/highlight";
import { outputLinking, setSources, sourceMap } from "../editor/linking";
import { jaxprLanguage } from "../editor/modes";
import type { EventOf } from "../connection/protocol";
import { PerPipelinePane } from "./pane";

export type AutodiffEvent = EventOf<"autodiff">;

export interface StageTab {
  /** `direct/forward`: the tab's key, kept across runs */
  key: string;
  label: string;
  title: string;
  text: string;
  sources: Map<number, number>;
}

const STAGE_LABELS: Record<string, string> = {
  jvp: "JVP",
  forward: "forward",
  known: "known",
  linear: "linear",
  transpose: "transpose",
};

/** The stages as tabs, in the engine's order (the direct path first). */
export function stageTabs(ev: AutodiffEvent): StageTab[] {
  return ev.stages.map((s) => ({
    key: `${s.path}/${s.stage}`,
    label: `${s.path} · ${STAGE_LABELS[s.stage] ?? s.stage}`,
    title: s.title,
    text: s.text,
    sources: sourceMap(s.sources),
  }));
}

/** A path's heading: its name, whether JAX takes it by default, and what it saves. */
export function pathSummary(p: AutodiffEvent["paths"][number]): string {
  const name = p.path === "direct" ? "direct linearization" : "classic (JVP + partial eval + transpose)";
  const dflt = p.default ? " — JAX's default" : "";
  if (p.status !== "ok") return `${name}${dflt}: ${p.status}${p.note ? ` (${p.note})` : ""}`;
  return `${name}${dflt}: ${p.residuals.length} residuals, ${fmtBytes(p.residual_bytes)} computed`;
}

/** One residual as a table row's cells: name, aval, bytes, what made it, line. */
export function residualCells(r: AutodiffEvent["paths"][number]["residuals"][number]): string[] {
  return [r.name ?? "", `${r.dtype}[${r.shape.join(",")}]`, fmtBytes(r.bytes), r.source, r.line != null ? String(r.line) : "—"];
}

/** One checkpoint policy as a row's cells; the pipeline's own is starred. */
export type PolicyRow = NonNullable<AutodiffEvent["policies"]>[number];

export function policyCells(p: PolicyRow): string[] {
  return [
    p.current ? `${p.policy} ★` : p.policy,
    String(p.residuals),
    fmtBytes(p.residual_bytes),
    typeof p.flops_backward === "number" ? fmtCount(p.flops_backward) : "—",
    typeof p.flops_recomputed === "number" ? fmtCount(p.flops_recomputed) : "—",
  ];
}

function table(head: string[], rows: string[][], lines: (number | null)[], onLine: (line: number | null) => void): HTMLElement {
  const body = rows.map((cells, i) => {
    const tr = h("tr", {}, ...cells.map((c, j) => h("td", { class: j === 0 ? "mono" : "num" }, c)));
    tr.addEventListener("mouseenter", () => onLine(lines[i] ?? null));
    tr.addEventListener("mouseleave", () => onLine(null));
    return tr;
  });
  return h("table", { class: "autodiff memory" }, h("thead", {}, h("tr", {}, ...head.map((t) => h("th", {}, t)))), h("tbody", {}, ...body));
}

export class AutodiffPane extends PerPipelinePane<"autodiff"> {
  readonly consumes = ["autodiff"] as const;
  private selected = "direct/forward";
  private view: EditorView | null = null;

  constructor(
    root: HTMLElement,
    private readonly onHover: (codeLine: number | null, from: EditorView) => void,
    private readonly onPin: (codeLine: number) => void,
    private readonly onLine: (codeLine: number | null) => void,
  ) {
    super(root);
    this.render();
  }

  /** The stage view on show, for the editor's hover to mark its lines. */
  views(): EditorView[] {
    return this.view ? [this.view] : [];
  }

  badge(): string {
    const ev = this.events.get("main");
    return ev?.stages.length ? String(ev.stages.length) : "";
  }

  protected render(): void {
    this.view?.destroy();
    this.view = null;
    clear(this.root);
    const ev = this.events.get(this.pipelines.find((p) => this.events.has(p)) ?? "main");
    if (!ev) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No autodiff stages in this run." : "Waiting for the autodiff stages…"));
      return;
    }
    if (ev.transform) {
      this.root.append(h("p", { class: "autodiff-head" }, h("strong", {}, ev.transform), ` of ${ev.function} with respect to ${(ev.wrt ?? []).join(", ")}`));
    }
    for (const n of ev.notes ?? []) this.root.append(h("p", { class: "pane-note" }, n));
    // the stages and their jaxpr first (above the fold), the residual tables after
    const tabs = stageTabs(ev);
    const current = tabs.find((t) => t.key === this.selected) ?? tabs[0];
    const holder = h("div", { class: "ir-body", role: "tabpanel", id: "autodiff-stage", "aria-label": current ? `autodiff ${current.label}` : "autodiff" });
    if (current) {
      const bar = h("div", { class: "autodiff-stages", role: "tablist", "aria-label": "Autodiff stages" });
      for (const t of tabs) {
        const button = h("button", { type: "button", role: "tab", "aria-controls": "autodiff-stage", "aria-selected": t.key === current.key ? "true" : "false", title: t.title }, t.label);
        button.addEventListener("click", () => {
          this.selected = t.key;
          this.render();
        });
        bar.append(button);
      }
      this.root.append(bar, h("p", { class: "pane-note" }, current.title), holder);
    }
    for (const p of ev.paths) {
      this.root.append(h("h3", {}, pathSummary(p)));
      if (p.status === "ok" && p.residuals.length) {
        this.root.append(
          table(["residual", "aval", "bytes", "made by", "line"], p.residuals.map(residualCells), p.residuals.map((r) => r.line ?? null), this.onLine),
        );
      }
    }
    if (ev.policies?.length) {
      this.root.append(
        h("h3", {}, "checkpoint policies"),
        table(["policy", "residuals", "bytes computed", "backward FLOPs", "recomputed FLOPs"], ev.policies.map(policyCells), ev.policies.map(() => null), this.onLine),
      );
      if (ev.flops_source) this.root.append(h("p", { class: "pane-note" }, `FLOPs: ${ev.flops_source}`));
    }
    if (!current) return;
    this.view = new EditorView({
      parent: holder,
      state: EditorState.create({
        doc: current.text,
        extensions: [
          EditorState.readOnly.of(true),
          lineNumbers(),
          jaxprLanguage,
          highlighting,
          outputLinking(this.onHover, this.onPin),
          EditorView.contentAttributes.of({ "aria-label": `autodiff ${current.label}`, "data-testid": "out-autodiff", tabindex: "0" }),
        ],
      }),
    });
    this.view.dispatch({ effects: setSources.of(current.sources) });
  }
}
