// The jaxpr, StableHLO and HLO panes: read-only CodeMirror views with highlighting
// and colour bands; in compare mode a side-by-side diff of the two pipelines. A new
// run leaves the last run's text on show, marked stale (aria-busy, dimmed) from
// STALE_MS after its start, until its own replaces it (ir_texts.ts): the page is not
// laid out again while the run goes, and a warm edit's text comes before the mark.
import type { MergeView } from "@codemirror/merge";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { EditorState, type Extension } from "@codemirror/state";
import { EditorView, keymap, lineNumbers } from "@codemirror/view";
import type { Language } from "@codemirror/language";
import { Throttled } from "./render";
import { highlighting } from "../editor/highlight";
import { clear, h } from "../util/dom";
import { outputLinking, setSources, sourceMap } from "../editor/linking";
import { hloLanguage, jaxprLanguage, mlirLanguage } from "../editor/modes";
import { opDocsTooltip } from "../editor/opdocs-tooltip";
import type { IrType, RunEvent, Sources } from "../connection/protocol";
import { IrTexts, minimalChange } from "./ir_texts";
import type { OutputPane } from "./pane";

const LANGUAGES: Record<IrType, Language> = { jaxpr: jaxprLanguage, stablehlo: mlirLanguage, hlo: hloLanguage };
export const IR_TITLES: Record<IrType, string> = { jaxpr: "jaxpr", stablehlo: "StableHLO", hlo: "HLO" };

/** The last run's text on show is marked stale (aria-busy, dimmed) when the new one
 * is this late (ms): a warm edit's comes sooner, and its pane is drawn once. */
export const STALE_MS = 250;

export type HoverFn = (codeLine: number | null, from: EditorView) => void;

export class IrPane implements OutputPane {
  readonly consumes: readonly IrType[];
  private readonly texts = new IrTexts();
  private labels: Record<string, string> = {};
  private single: EditorView | null = null;
  private merge: MergeView | null = null;
  private body: HTMLElement;
  private note: HTMLElement;
  /** bumped by every render: a compare view loaded late draws only if still current */
  private generation = 0;
  /** the stale mark written STALE_MS after a run's start, or at once when its text
   * (or its end) comes first */
  private readonly staleMark = new Throttled(() => this.markStale(), STALE_MS);

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

  /** A new run; `pipelines` are "main" and the compare ones. The old texts stay on
   * show, stale, until the new ones come (unless the pipelines changed). */
  reset(pipelines: string[], labels: Record<string, string>): void {
    this.labels = labels;
    if (this.texts.reset(pipelines)) this.render();
    else this.renderNote();
    this.staleMark.after();
  }

  set(pipeline: string, text: string, sources: Sources | undefined): void {
    this.texts.set(pipeline, { text, sources: sourceMap(sources) });
    this.render();
    this.staleMark.now();
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type === this.kind) this.set(pipeline, event.text, event.sources);
  }

  end(): void {
    if (this.texts.end()) this.render();
    else this.renderNote();
    this.staleMark.now();
  }

  /** Whether the run on show sent `pipeline`'s text (a stale one does not count). */
  has(pipeline = "main"): boolean {
    return this.texts.has(pipeline);
  }

  /** The run on show's text (never a stale one). */
  text(pipeline = "main"): string | undefined {
    return this.texts.text(pipeline);
  }

  /** Every view showing output now (one, or two in compare mode). */
  views(): EditorView[] {
    if (this.merge) return [this.merge.a, this.merge.b];
    return this.single ? [this.single] : [];
  }

  /** Code lines that produced some output line on show in this pane. */
  codeLines(): Set<number> {
    return this.texts.codeLines();
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
      // tabindex: its scroller reached by keyboard (axe-core's scrollable-region-focusable)
      EditorView.contentAttributes.of({ "aria-label": label, "data-testid": `out-${this.kind}`, tabindex: "0" }),
    ];
  }

  /** The text on show is the last run's (stale) while the new run's is on its way:
   * said by aria-busy on the pane (style.css dims it), written only when it changes. */
  private markStale(): void {
    const busy = this.texts.isStale();
    if ((this.root.getAttribute("aria-busy") === "true") !== busy) {
      if (busy) this.root.setAttribute("aria-busy", "true");
      else this.root.removeAttribute("aria-busy");
    }
  }

  private renderNote(): void {
    const title = IR_TITLES[this.kind];
    const missing = this.texts.missing().length > 0;
    const text = !missing ? "" : this.texts.ended ? `No ${title}: the run ended before this stage.` : `Waiting for the ${title}…`;
    // written only when it changes: an unchanged note is no layout
    if (this.note.textContent !== text) this.note.textContent = text;
    if (this.note.hidden !== !missing) this.note.hidden = !missing;
  }

  private render(): void {
    this.generation++;
    this.renderNote();
    const compare = this.texts.pipelines.length > 1;
    if (!compare) {
      this.destroyMerge();
      const out = this.texts.shown("main");
      if (!this.single) {
        this.single = new EditorView({ parent: this.body, state: EditorState.create({ doc: "", extensions: this.extensions(IR_TITLES[this.kind]) }) });
      }
      const view = this.single;
      if (view.dom.hidden !== !out) view.dom.hidden = !out;
      // the text on show changed where the new one differs from it, not replaced
      // whole: the lines both share are not drawn again
      const before = view.state.doc.toString();
      const change = minimalChange(before, out?.text ?? "");
      if (change && change.from === 0 && change.to === before.length && change.insert.length > 0) {
        // a text replaced whole (the first one): a new state, whose viewport is worked
        // out afresh; a change maps the old viewport over the whole new text, and
        // CodeMirror drew every line of it once (issue 32: 20,000 layout objects for a
        // hidden pane's 5,000-line HLO)
        // its source map set in the state itself: one update of the view, not two (each
        // reads the DOM's selection, a layout of the page: ~25 ms on a big program)
        const fresh = EditorState.create({ doc: change.insert, extensions: this.extensions(IR_TITLES[this.kind]) });
        view.setState(fresh.update({ effects: setSources.of(out?.sources ?? new Map()) }).state);
        return;
      }
      view.dispatch({ changes: change ?? undefined, effects: setSources.of(out?.sources ?? new Map()) });
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
    const [pa, pb] = this.texts.pipelines as [string, string];
    const a = this.texts.shown(pa);
    const b = this.texts.shown(pb);
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
