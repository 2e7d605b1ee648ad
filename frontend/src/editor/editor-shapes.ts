// Shapes in the editor: the `shapes` output of the last run (each expression's span and
// the shape and dtype of its value, as traced: sandbox/engine/outputs/shapes.py) shown on hover
// (the smallest span under the pointer), and inline under a `# ^?` comment, for the
// expression at the caret's column on the line above (as in the TypeScript playground).
// The spans follow edits; an edit inside one drops it until the next run.
import { RangeSetBuilder, StateEffect, StateField, type EditorState, type Extension, type Text } from "@codemirror/state";
import { Decoration, EditorView, WidgetType, hoverTooltip, type DecorationSet } from "@codemirror/view";
import { h } from "../util/dom";
import type { EventOf } from "../connection/protocol";

export type ShapeSpan = EventOf<"shapes">["spans"][number];

/** A span placed in the document: `from`/`to` are offsets (`to` exclusive). */
export interface PlacedSpan {
  from: number;
  to: number;
  span: ShapeSpan;
}

/** `float32[4,2]`, as `jax.typeof` prints a value's type. */
export function shapeText(shape: readonly number[], dtype: string): string {
  return `${dtype}[${shape.join(",")}]`;
}

/** One line saying what the span's value is: its type, and under vmap its batched type. */
export function describeSpan(s: ShapeSpan): string {
  let text = shapeText(s.shape, s.dtype);
  if (s.more?.length) text = `(${[text, ...s.more.map((o) => shapeText(o.shape, o.dtype))].join(", ")})`;
  if (s.batched_shape) {
    const dims = s.batch_dims;
    const where = dims?.length ? `, batch dim${dims.length > 1 ? "s" : ""} ${dims.join(", ")}` : "";
    text += ` per example; batched ${shapeText(s.batched_shape, s.dtype)}${where}`;
  }
  if (s.sharding) text += ` ${s.sharding}`;
  return text;
}

/** The spans placed in `doc` (lines from 1, columns in characters from 0); those that
 * do not fit the document (it changed since the run) are left out. */
export function placeSpans(doc: Text, spans: readonly ShapeSpan[]): PlacedSpan[] {
  const placed: PlacedSpan[] = [];
  for (const span of spans) {
    if (span.line < 1 || span.end_line > doc.lines) continue;
    const start = doc.line(span.line);
    const end = doc.line(span.end_line);
    if (span.col > start.length || span.end_col > end.length) continue;
    const from = start.from + span.col;
    const to = end.from + span.end_col;
    if (to > from) placed.push({ from, to, span });
  }
  return placed;
}

/** The smallest span holding `pos` (the innermost expression there); null where none does. */
export function smallestSpan(spans: readonly PlacedSpan[], pos: number): PlacedSpan | null {
  let best: PlacedSpan | null = null;
  for (const s of spans) {
    if (pos < s.from || pos >= s.to) continue;
    if (best === null || s.to - s.from < best.to - best.from) best = s;
  }
  return best;
}

const QUERY = /^(\s*)#\s*\^\?/;

/** The `# ^?` queries of a document: for each such line, the line number and the
 * position its caret points at on the line above (null past that line's end). */
export function caretQueries(doc: Text): { line: number; pos: number | null }[] {
  const found: { line: number; pos: number | null }[] = [];
  for (let n = 2; n <= doc.lines; n++) {
    const text = doc.line(n).text;
    if (!QUERY.test(text)) continue;
    const column = text.indexOf("^");
    const above = doc.line(n - 1);
    found.push({ line: n, pos: column < above.length ? above.from + column : null });
  }
  return found;
}

export const setShapes = StateEffect.define<readonly ShapeSpan[]>();
/** The spans the run's shapes event left out (its `spans_left_out`: past the event's
 * bounds, the last in code order): a `# ^?` with no span says they may be the reason. */
export const setShapesLeftOut = StateEffect.define<number>();

const leftOutField = StateField.define<number>({
  create: () => 0,
  update(n, tr) {
    for (const e of tr.effects) if (e.is(setShapesLeftOut)) n = e.value;
    return n;
  },
});

/** A `# ^?` line's words where no span sent covers its caret. */
export function noSpanText(leftOut: number): string {
  if (leftOut <= 0) return "no traced expression here";
  return `no traced expression sent here (${leftOut} ${leftOut === 1 ? "span" : "spans"} past the shapes event's bound, the last in the code, were left out)`;
}

const shapesField = StateField.define<PlacedSpan[]>({
  create: () => [],
  update(spans, tr) {
    let out = spans;
    if (tr.docChanged) {
      out = [];
      for (const s of spans) {
        if (tr.changes.touchesRange(s.from, s.to)) continue; // edited: stale until the next run
        out.push({ from: tr.changes.mapPos(s.from, 1), to: tr.changes.mapPos(s.to, -1), span: s.span });
      }
    }
    for (const e of tr.effects) if (e.is(setShapes)) out = placeSpans(tr.state.doc, e.value);
    return out;
  },
});

/** The spans placed in the editor now (for the tests and the page's scripts). */
export function placedShapes(state: EditorState): readonly PlacedSpan[] {
  return state.field(shapesField, false) ?? [];
}

/** The `# ^?` lines' texts as shown after them now: `[line, text]`. */
export function queryTexts(state: EditorState): [number, string][] {
  const out: [number, string][] = [];
  const deco = state.field(queryField, false);
  deco?.between(0, state.doc.length, (from, _to, value) => {
    out.push([state.doc.lineAt(from).number, (value.spec.widget as ShapeWidget).text]);
  });
  return out;
}

class ShapeWidget extends WidgetType {
  constructor(readonly text: string) {
    super();
  }
  override eq(other: ShapeWidget): boolean {
    return other.text === this.text;
  }
  toDOM(): HTMLElement {
    return h("span", { class: "cm-shape-inline", "data-testid": "shape-inline" }, ` ${this.text}`);
  }
}

/** The widgets after each `# ^?` line: the shape at its caret, when a run gave one. */
function queryDecorations(state: EditorState): DecorationSet {
  const spans = state.field(shapesField);
  const builder = new RangeSetBuilder<Decoration>();
  if (spans.length === 0) return builder.finish();
  for (const q of caretQueries(state.doc)) {
    const found = q.pos === null ? null : smallestSpan(spans, q.pos);
    const text = found ? describeSpan(found.span) : noSpanText(state.field(leftOutField, false) ?? 0);
    const end = state.doc.line(q.line).to;
    builder.add(end, end, Decoration.widget({ widget: new ShapeWidget(text), side: 1 }));
  }
  return builder.finish();
}

const queryField = StateField.define<DecorationSet>({
  create: (state) => queryDecorations(state),
  update(deco, tr) {
    const changed = tr.docChanged || tr.effects.some((e) => e.is(setShapes) || e.is(setShapesLeftOut));
    return changed ? queryDecorations(tr.state) : deco;
  },
  provide: (f) => EditorView.decorations.from(f),
});

const shapeHover = hoverTooltip((view, pos) => {
  const found = smallestSpan(view.state.field(shapesField), pos);
  if (!found) return null;
  const { span } = found;
  return {
    pos: found.from,
    end: found.to,
    above: true,
    create: () => ({
      dom: h(
        "div",
        { class: "cm-shape-tooltip", role: "tooltip", "data-testid": "shape-tooltip" },
        h("code", {}, describeSpan(span)),
        span.primitive ? h("span", { class: "cm-shape-prim" }, ` ${span.primitive}`) : "",
      ),
    }),
  };
});

/** The editor's extension: the spans (set with `setShapes`), the hover, the `# ^?` widgets. */
export function editorShapes(): Extension {
  return [shapesField, leftOutField, queryField, shapeHover];
}
