import { EditorState, Text } from "@codemirror/state";
import { describe, expect, it } from "vitest";
import { caretQueries, describeSpan, editorShapes, placeSpans, placedShapes, queryTexts, setShapes, smallestSpan, type ShapeSpan } from "../src/editor/editor-shapes";

const CODE = ["def f(x, w):", "    y = jnp.tanh(x @ w)", "    # ^?", "    return y"].join("\n");
// as the engine gives them: lines from 1, columns in characters from 0, end exclusive
const MATMUL: ShapeSpan = { line: 2, col: 17, end_line: 2, end_col: 22, shape: [4, 2], dtype: "float32", primitive: "dot_general" };
const TANH: ShapeSpan = { line: 2, col: 8, end_line: 2, end_col: 23, shape: [4, 2], dtype: "float32", primitive: "tanh", batched_shape: [5, 4, 2], batch_dims: [0] };

describe("the span under the pointer", () => {
  const doc = Text.of(CODE.split("\n"));
  const placed = placeSpans(doc, [TANH, MATMUL]);
  const at = (line: number, col: number) => smallestSpan(placed, doc.line(line).from + col)?.span ?? null;

  it("places spans by line and column", () => {
    expect(placed.map((p) => doc.sliceString(p.from, p.to))).toEqual(["jnp.tanh(x @ w)", "x @ w"]);
  });

  it("is the smallest span holding the position", () => {
    expect(at(2, 19)).toBe(MATMUL); // on the `@`: inside both, the matmul is smaller
    expect(at(2, 8)).toBe(TANH); // on `jnp`
    expect(at(2, 22)).toBe(TANH); // the `)` after `w`: the end is exclusive for the matmul
    expect(at(2, 23)).toBeNull();
    expect(at(1, 4)).toBeNull();
  });

  it("leaves out spans the document no longer holds", () => {
    expect(placeSpans(Text.of(["x"]), [MATMUL])).toEqual([]);
  });

  it("says the per-example shape, the batched one and the batch dimension", () => {
    expect(describeSpan(MATMUL)).toBe("float32[4,2]");
    expect(describeSpan(TANH)).toBe("float32[4,2] per example; batched float32[5,4,2], batch dim 0");
    expect(describeSpan({ ...MATMUL, shape: [], more: [{ shape: [3], dtype: "int32" }] })).toBe("(float32[], int32[3])");
  });
});

describe("# ^? queries", () => {
  it("point at the caret's column on the line above", () => {
    const doc = Text.of(CODE.split("\n"));
    expect(caretQueries(doc)).toEqual([{ line: 3, pos: doc.line(2).from + 6 }]);
    const under = Text.of(["    y = jnp.tanh(x @ w)", "    #              ^?", "# ^? first-line-less", "#^?"]);
    expect(caretQueries(under)).toEqual([
      { line: 2, pos: 19 },
      { line: 3, pos: under.line(2).from + 2 },
      { line: 4, pos: under.line(3).from + 1 },
    ]);
    expect(caretQueries(Text.of(["# ^?"]))).toEqual([]); // no line above
    expect(caretQueries(Text.of(["x", "y  # ^? not a query line"]))).toEqual([]);
  });

  it("show the shape at the caret after a run, and follow edits", () => {
    const code = ["def f(x, w):", "    y = jnp.tanh(x @ w)", "    #             ^?", "    return y"].join("\n");
    let state = EditorState.create({ doc: code, extensions: editorShapes() });
    expect(queryTexts(state)).toEqual([]); // before a run: nothing
    state = state.update({ effects: setShapes.of([TANH, MATMUL]) }).state;
    expect(queryTexts(state)).toEqual([[3, "float32[4,2]"]]);
    // a line typed above moves the spans with the code
    state = state.update({ changes: { from: 0, insert: "import jax\n" } }).state;
    expect(placedShapes(state).map((p) => state.doc.sliceString(p.from, p.to))).toEqual(["jnp.tanh(x @ w)", "x @ w"]);
    expect(queryTexts(state)).toEqual([[4, "float32[4,2]"]]);
    // an edit inside the matmul drops it (and the tanh around it) until the next run
    const at = state.doc.toString().indexOf("@");
    state = state.update({ changes: { from: at, to: at + 1, insert: "*" } }).state;
    expect(placedShapes(state)).toEqual([]);
  });
});
