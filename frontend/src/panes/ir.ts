// The jaxpr, StableHLO and HLO panes: read-only CodeMirror views with highlighting
// and colour bands; in compare mode a side-by-side diff of the two pipelines.
import type { MergeView } from "@codemirror/merge";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { EditorState, type Extension } from "@codemirror/state";
import { EditorView, keymap, lineNumbers } from "@codemirror/view";
import type { Language } from "@codemirror/language";
import { highlighting } from "../highlight";
import { clear, h } from "../dom";
import { outputLinking, setSources, sourceMap } from "../linking";
import { hloLanguage, jaxprLanguage, mlirLanguage } from "../modes";
import { opDocsTooltip } from "../opdocs-tooltip";
import type { IrType, RunEvent, Sources } from "../protocol";
import type { OutputPane } from "./pane";

const LANGUAGES: Record<IrType, Language> = { jaxpr: jaxprLanguage, stablehlo: mlirLanguage, hlo: hloLanguage };
export const IR_TITLES: Record<IrType, string> = { jaxpr: "jaxpr", stablehlo: "StableHLO", hlo: "HLO" };

interface Output {
  text: string;
  sources: Map<number, number>;
}

export type HoverFn = (codeLine: number | null, from: EditorView) => void;

export class IrPane implements OutputPane {
  readonly consumes: readonly IrType[];
  private outputs = new Map<string, Output>();
  private pipelines: string[] = ["main"];
  private labels: Record<string, string> = {};
  private single: EditorView | null = null;
  private merge: MergeView | null = null;
  private body: HTMLElement;
  private note: HTMLElement;
  private ended = false;
  /** bumped by every render: a compare view loaded late draws only if still current */
  private generation = 0;

  constructor(
    readonly kind: IrType,
    readonly root: HTMLElement,
    private readonly onHover: HoverFn,
    private readonly onPin: (codeLine: number) => void,
  ) {
    this.consumes = [kind];
    this.note = h("p", { class: "pane-note", role: "status" });
    this.body = h("div", { class: "ir-body" });
    root.append(this.note, this.body);
    this.render();
  }

  /** A new run: forget the old texts; `pipelines` are "main" and the compare ones. */
  reset(pipelines: string[], labels: Record<string, string>): void {
    this.outputs.clear();
    this.pipelines = pipelines;
    this.labels = labels;
    this.ended = false;
    this.render();
  }

  set(pipeline: string, text: string, sources: Sources | undefined): void {
    this.outputs.set(pipeline, { text, sources: sourceMap(sources) });
    this.render();
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type === this.kind) this.set(pipeline, event.text, event.sources);
  }

  end(): void {
    this.ended = true;
    this.renderNote();
  }

  has(pipeline = "main"): boolean {
    return this.outputs.has(pipeline);
  }

  text(pipeline = "main"): string | undefined {
    return this.outputs.get(pipeline)?.text;
  }

  /** Every view showing output now (one, or two in compare mode). */
  views(): EditorView[] {
    if (this.merge) return [this.merge.a, this.merge.b];
    return this.single ? [this.single] : [];
  }

  /** Code lines that produced some output line in this pane. */
  codeLines(): Set<number> {
    const lines = new Set<number>();
    for (const out of this.outputs.values()) for (const l of out.sources.values()) lines.add(l);
    return lines;
  }

  private extensions(label: string): Extension {
    return [
      EditorState.readOnly.of(true),
      lineNumbers(),
      LANGUAGES[this.kind],
      highlighting,
      highlightSelectionMatches(),
      keymap.of(searchKeymap),
      outputLinking(this.onHover, this.onPin),
      opDocsTooltip(this.kind),
      EditorView.contentAttributes.of({ "aria-label": label, "data-testid": `out-${this.kind}` }),
    ];
  }

  private renderNote(): void {
    const title = IR_TITLES[this.kind];
    const missing = this.pipelines.filter((p) => !this.outputs.has(p));
    if (missing.length === 0) this.note.textContent = "";
    else if (this.ended) this.note.textContent = `No ${title}: the run ended before this stage.`;
    else this.note.textContent = `Waiting for the ${title}…`;
    this.note.hidden = missing.length === 0;
  }

  private render(): void {
    this.generation++;
    this.renderNote();
    const compare = this.pipelines.length > 1;
    if (!compare) {
      this.destroyMerge();
      const out = this.outputs.get("main");
      if (!this.single) {
        this.single = new EditorView({ parent: this.body, state: EditorState.create({ doc: "", extensions: this.extensions(IR_TITLES[this.kind]) }) });
      }
      const view = this.single;
      view.dom.hidden = !out;
      view.dispatch({
        changes: { from: 0, to: view.state.doc.length, insert: out?.text ?? "" },
        effects: setSources.of(out?.sources ?? new Map()),
      });
      return;
    }
    // Compare: rebuilt whenever a text arrives (a handful of times per run); the diff
    // view (@codemirror/merge) is loaded on first use
    const generation = this.generation;
    void import("@codemirror/merge").then(({ MergeView }) => {
      if (generation === this.generation) this.renderMerge(MergeView);
    });
  }

  private renderMerge(Merge: typeof MergeView): void {
    if (this.single) {
      this.single.destroy();
      this.single = null;
    }
    this.destroyMerge();
    clear(this.body);
    const [pa, pb] = this.pipelines as [string, string];
    const a = this.outputs.get(pa);
    const b = this.outputs.get(pb);
    const head = h(
      "div",
      { class: "merge-head" },
      h("span", { class: "pipe-a" }, `A: ${this.labels[pa] ?? pa}`),
      h("span", { class: "pipe-b" }, `B: ${this.labels[pb] ?? pb}`),
    );
    const holder = h("div", { class: "merge-holder" });
    this.body.append(head, holder);
    this.merge = new Merge({
      parent: holder,
      a: { doc: a?.text ?? "", extensions: this.extensions(`${IR_TITLES[this.kind]} A`) },
      b: { doc: b?.text ?? "", extensions: this.extensions(`${IR_TITLES[this.kind]} B`) },
      highlightChanges: true,
      gutter: true,
      diffConfig: { scanLimit: 2000 },
    });
    this.merge.a.dispatch({ effects: setSources.of(a?.sources ?? new Map()) });
    this.merge.b.dispatch({ effects: setSources.of(b?.sources ?? new Map()) });
  }

  private destroyMerge(): void {
    if (this.merge) {
      this.merge.destroy();
      this.merge = null;
      clear(this.body);
      if (this.single) this.body.append(this.single.dom);
    }
  }
}
