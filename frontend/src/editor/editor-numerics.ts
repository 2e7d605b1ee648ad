// The numerics output's band in the editor: each line where error is born, tinted by
// how many ulps its equations add themselves (the `lines` of a run's `numerics` event:
// 1–63 ulps, 64–2^16, more, and an overflow). A run's event sets it; the next run
// clears it.
import { RangeSetBuilder, StateEffect, StateField } from "@codemirror/state";
import { Decoration, EditorView, type DecorationSet } from "@codemirror/view";

export interface NumericsMark {
  line: number;
  /** the most ulps born on the line ("inf": an overflow) */
  bornUlp: number | string;
  hint: string | null;
}

export const setNumericsMarks = StateEffect.define<readonly NumericsMark[]>();

/** The band's level: 0 none (under an ulp), 1 a few ulps, 2 digits lost (≥ 64 ulps,
 * where the hints fire), 3 most of them (≥ 2^16), 4 an overflow or a NaN. */
export function bornLevel(bornUlp: number | string): number {
  if (typeof bornUlp === "string") return bornUlp === "nan" || bornUlp.endsWith("inf") ? 4 : 0;
  if (bornUlp >= 65536) return 3;
  if (bornUlp >= 64) return 2;
  return bornUlp >= 1 ? 1 : 0;
}

export function numericsDecorations(doc: { lines: number; line(n: number): { from: number } }, marks: readonly NumericsMark[]): DecorationSet {
  const builder = new RangeSetBuilder<Decoration>();
  for (const m of [...marks].sort((a, b) => a.line - b.line)) {
    const level = bornLevel(m.bornUlp);
    if (level === 0 || m.line < 1 || m.line > doc.lines) continue;
    const title = `${m.bornUlp} ulp born on this line${m.hint ? ` — hint: ${m.hint}` : ""}`;
    builder.add(doc.line(m.line).from, doc.line(m.line).from, Decoration.line({ class: `cm-numerics-line cm-numerics-${level}`, attributes: { "data-numerics-line": String(m.line), "data-born-level": String(level), title } }));
  }
  return builder.finish();
}

export const numericsField = StateField.define<DecorationSet>({
  create: () => Decoration.none,
  update(deco, tr) {
    let next = deco.map(tr.changes);
    for (const e of tr.effects) if (e.is(setNumericsMarks)) next = numericsDecorations(tr.state.doc, e.value);
    return next;
  },
  provide: (f) => EditorView.decorations.from(f),
});
