// The lines a tour step asks the reader to look at, marked in the editor: a line
// decoration (a class and a left rule) added to the editor as an extension of its own
// (StateEffect.appendConfig), so the editor's module knows nothing of the tour. The
// marks follow edits (mapped through changes) and go when the step is left.
import { StateEffect, StateField, type Extension, type Range } from "@codemirror/state";
import { Decoration, EditorView, type DecorationSet } from "@codemirror/view";

export const setTourMarks = StateEffect.define<number[]>();

const line = Decoration.line({ class: "cm-tour-mark", attributes: { "data-tour-mark": "true" } });

const field = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(marks, tr) {
    let next = marks.map(tr.changes);
    for (const effect of tr.effects) {
      if (!effect.is(setTourMarks)) continue;
      const ranges: Range<Decoration>[] = [];
      for (const n of [...new Set(effect.value)].sort((a, b) => a - b)) {
        if (n >= 1 && n <= tr.state.doc.lines) ranges.push(line.range(tr.state.doc.line(n).from));
      }
      next = Decoration.set(ranges);
    }
    return next;
  },
  provide: (f) => EditorView.decorations.from(f),
});

const installed = new WeakSet<EditorView>();

/** Marks `lines` (1-based) in `view`'s code; [] removes the marks. */
export function markLines(view: EditorView, lines: number[]): void {
  const effects: StateEffect<unknown>[] = [];
  if (!installed.has(view)) {
    installed.add(view);
    effects.push(StateEffect.appendConfig.of(tourMarks));
  }
  effects.push(setTourMarks.of(lines));
  view.dispatch({ effects });
  const first = lines[0];
  if (first !== undefined && first <= view.state.doc.lines) {
    view.dispatch({ effects: EditorView.scrollIntoView(view.state.doc.line(first).from, { y: "center" }) });
  }
}

export const tourMarks: Extension = field;
