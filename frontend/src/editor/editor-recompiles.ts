// The recompiles output's marks in the editor: each call site's line, tinted, with its
// summary at the line's end ("2 compiles, 1 hit — x: f32[3] → f32[4]"). A run's
// `recompiles` event sets them; the next run clears them.
import { RangeSetBuilder, StateEffect, StateField } from "@codemirror/state";
import { Decoration, EditorView, WidgetType, type DecorationSet } from "@codemirror/view";
import { h } from "../util/dom";

export interface RecompileMark {
  line: number;
  text: string;
}

export const setRecompileMarks = StateEffect.define<readonly RecompileMark[]>();

class SummaryWidget extends WidgetType {
  constructor(readonly text: string) {
    super();
  }
  override eq(other: SummaryWidget): boolean {
    return other.text === this.text;
  }
  toDOM(): HTMLElement {
    return h("span", { class: "cm-recompile-note", "data-testid": "recompile-mark" }, this.text);
  }
}

/** The marks, one per line (a line with several call sites joins their summaries). */
export function recompileDecorations(doc: { lines: number; line(n: number): { from: number; to: number } }, marks: readonly RecompileMark[]): DecorationSet {
  const byLine = new Map<number, string[]>();
  for (const m of marks) if (m.line >= 1 && m.line <= doc.lines) byLine.set(m.line, [...(byLine.get(m.line) ?? []), m.text]);
  const builder = new RangeSetBuilder<Decoration>();
  for (const line of [...byLine.keys()].sort((a, b) => a - b)) {
    const at = doc.line(line);
    builder.add(at.from, at.from, Decoration.line({ class: "cm-recompile-line", attributes: { "data-recompile-line": String(line) } }));
    builder.add(at.to, at.to, Decoration.widget({ widget: new SummaryWidget((byLine.get(line) ?? []).join(" · ")), side: 1 }));
  }
  return builder.finish();
}

export const recompileField = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(deco, tr) {
    let next = deco.map(tr.changes);
    for (const e of tr.effects) if (e.is(setRecompileMarks)) next = recompileDecorations(tr.state.doc, e.value);
    return next;
  },
  provide: (f) => EditorView.decorations.from(f),
});
