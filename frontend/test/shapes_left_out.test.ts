// A shapes event cut at its bounds (its spans_left_out; docs/api.md "Shapes"): a `# ^?`
// line that no span sent covers says spans were left out, instead of "no traced
// expression here" as if there were none.
import { EditorState } from "@codemirror/state";
import { describe, expect, it } from "vitest";
import { editorShapes, noSpanText, queryTexts, setShapes, setShapesLeftOut, type ShapeSpan } from "../src/editor/editor-shapes";

const SIN: ShapeSpan = { line: 2, col: 8, end_line: 2, end_col: 18, shape: [3], dtype: "float32", primitive: "sin" };
const CODE = ["def f(x):", "    y = jnp.sin(x)", "    z = jnp.cos(y)", "    #   ^?", "    return z"].join("\n");

describe("a cut shapes event", () => {
  it("says so where no span sent covers a query", () => {
    let state = EditorState.create({ doc: CODE, extensions: editorShapes() });
    state = state.update({ effects: [setShapesLeftOut.of(0), setShapes.of([SIN])] }).state;
    expect(queryTexts(state)).toEqual([[4, "no traced expression here"]]);
    state = state.update({ effects: [setShapesLeftOut.of(15), setShapes.of([SIN])] }).state;
    expect(queryTexts(state)).toEqual([[4, "no traced expression sent here (15 spans past the shapes event's bound, the last in the code, were left out)"]]);
    // the next run's event, whole, says nothing of it
    state = state.update({ effects: [setShapesLeftOut.of(0), setShapes.of([SIN])] }).state;
    expect(queryTexts(state)[0]![1]).toBe("no traced expression here");
  });

  it("words one span as one", () => {
    expect(noSpanText(1)).toContain("(1 span past");
  });
});
