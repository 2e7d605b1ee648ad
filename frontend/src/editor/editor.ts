// The Python editor: CodeMirror 6 with Python, the run key, the colour bands and the
// marker for the line an error points at. Python's parser, completion and search come
// a moment after the editor (editor/editor-extras.ts: out of the first screen's chunk).
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { bracketMatching, foldGutter, indentOnInput } from "@codemirror/language";
import { Compartment, EditorState, RangeSetBuilder, StateEffect, StateField } from "@codemirror/state";
import {
  Decoration,
  EditorView,
  WidgetType,
  drawSelection,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
  type DecorationSet,
} from "@codemirror/view";
import { recompileField } from "./editor-recompiles";
import { numericsField } from "./editor-numerics";
import { editorShapes } from "./editor-shapes";
import { highlighting } from "./highlight";
import { h, withCode } from "../util/dom";
import { editorLinking } from "./linking";

export interface ErrorMark {
  line: number;
  kind: string;
  hint: string;
}

export const setErrorMark = StateEffect.define<ErrorMark | null>();

class HintWidget extends WidgetType {
  constructor(readonly mark: ErrorMark) {
    super();
  }
  override eq(other: HintWidget): boolean {
    return other.mark.kind === this.mark.kind && other.mark.hint === this.mark.hint;
  }
  toDOM(): HTMLElement {
    return h(
      "div",
      { class: "cm-error-hint", role: "note", "aria-label": `error on line ${this.mark.line}` },
      h("strong", {}, this.mark.kind),
      this.mark.hint ? [" — ", ...withCode(this.mark.hint)] : "",
    );
  }
  override ignoreEvent(): boolean {
    return false;
  }
}

const errorField = StateField.define<{ mark: ErrorMark | null; deco: DecorationSet }>({
  create: () => ({ mark: null, deco: Decoration.none }),
  update(value, tr) {
    let mark = value.mark;
    let deco = value.deco.map(tr.changes);
    for (const e of tr.effects) {
      if (!e.is(setErrorMark)) continue;
      mark = e.value;
      const builder = new RangeSetBuilder<Decoration>();
      const doc = tr.state.doc;
      if (mark && mark.line >= 1 && mark.line <= doc.lines) {
        const line = doc.line(mark.line);
        builder.add(line.from, line.from, Decoration.line({ class: "cm-error-line", attributes: { "data-error-line": String(mark.line) } }));
        builder.add(line.to, line.to, Decoration.widget({ widget: new HintWidget(mark), block: true, side: 1 }));
      }
      deco = builder.finish();
    }
    return { mark, deco };
  },
  provide: (f) => EditorView.decorations.from(f, (v) => v.deco),
});

export interface EditorHooks {
  onChange: (code: string) => void;
  onRun: () => void;
  onHover: (codeLine: number | null, from: EditorView) => void;
  /** a click on a line number: pin that line's links (again: unpin) */
  onPin: (codeLine: number) => void;
  /** the JAX version runs ask for (its completion index: editor/completions.ts) */
  jaxVersion?: () => string | undefined;
}

export function createEditor(parent: HTMLElement, doc: string, hooks: EditorHooks): EditorView {
  // The editor's run keys. They mark the key event handled (preventDefault), and the
  // page's own Ctrl+Enter listener (app/shortcuts.ts) leaves a handled event alone: one
  // key press, one run.
  const runKey = keymap.of([
    { key: "Mod-Enter", run: () => (hooks.onRun(), true), preventDefault: true },
    { key: "Shift-Enter", run: () => (hooks.onRun(), true), preventDefault: true },
  ]);
  const before = new Compartment();
  const after = new Compartment();
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc,
      extensions: [
        runKey,
        lineNumbers({
          domEventHandlers: {
            click: (view, line) => (hooks.onPin(view.state.doc.lineAt(line.from).number), true),
          },
        }),
        highlightActiveLineGutter(),
        foldGutter(),
        history(),
        drawSelection(),
        indentOnInput(),
        bracketMatching(),
        highlightActiveLine(),
        highlighting,
        EditorState.tabSize.of(4),
        // long lines (the examples' header comments) wrap instead of being cut
        EditorView.lineWrapping,
        before.of([]),
        keymap.of(defaultKeymap),
        after.of([]),
        keymap.of([...historyKeymap, indentWithTab]),
        errorField,
        editorLinking(hooks.onHover),
        editorShapes(),
        recompileField,
        numericsField,
        EditorView.contentAttributes.of({ "aria-label": "Python code", "data-testid": "code", tabindex: "0" }),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) hooks.onChange(u.state.doc.toString());
        }),
      ],
    }),
  });
  void import("./editor-extras").then(({ editorExtras }) => {
    const extras = editorExtras(hooks.jaxVersion);
    view.dispatch({ effects: [before.reconfigure(extras.before), after.reconfigure(extras.after)] });
  });
  return view;
}

/** Replaces the whole document as one undoable change. */
export function setCode(view: EditorView, code: string): void {
  if (view.state.doc.toString() === code) return;
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: code } });
}

export function revealLine(view: EditorView, line: number): void {
  if (line < 1 || line > view.state.doc.lines) return;
  // the whole line selected (a jump's target is plain to see, and a copy takes it)
  const { from, to } = view.state.doc.line(line);
  view.dispatch({ selection: { anchor: from, head: to }, effects: EditorView.scrollIntoView(from, { y: "center" }) });
  view.focus();
}
