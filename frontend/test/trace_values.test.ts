import { describe, expect, it } from "vitest";
import { parseEvent } from "../src/connection/protocol";
import { badText, COLUMNS, firstBad, fmtNumber, traceTable } from "../src/panes/trace_values";

// The event the engine makes for grad of `jnp.where(x > 0, jnp.sqrt(x), 0.0)` at 0
// (sqrt on line 4), trimmed to the rows that matter.
const stats = (extra: Record<string, unknown> = {}) => ({ shape: [], dtype: "float32", min: 0, max: 0, mean: 0, nan_count: 0, inf_count: 0, ...extra });
const EVENT = {
  type: "trace_values",
  pipeline: "main",
  rows: [
    { eqn: "0", primitive: "gt", depth: 0, line: 5, phase: "forward", outputs: [{ shape: [], dtype: "bool", min: 0, max: 0, mean: 0 }], outputs_total: 1, inputs: [null, null], made: [] },
    { eqn: "1", primitive: "sqrt", depth: 0, line: 4, phase: "forward", outputs: [stats()], outputs_total: 1, inputs: [null], made: [] },
    { eqn: "2", primitive: "div", depth: 0, line: 4, phase: "forward", outputs: [stats({ min: null, max: null, mean: null, inf_count: 1 })], outputs_total: 1, inputs: [null, 1], made: ["inf"] },
    { eqn: "3.0", primitive: "select_n", depth: 1, line: 5, phase: "backward", outputs: [stats()], outputs_total: 1, inputs: [0, null, null], made: [] },
    { eqn: "3", primitive: "jit", depth: 0, line: 5, phase: "backward", outputs: [stats(), stats()], outputs_total: 3, inputs: [0, null, null], made: [] },
    { eqn: "4", primitive: "mul", depth: 0, line: 4, phase: "backward", outputs: [stats({ min: null, max: null, mean: null, nan_count: 1 })], outputs_total: 1, inputs: [4, 2], made: ["nan"] },
  ],
  first_bad: 2,
  first_nan: 5,
  first_inf: 2,
  cut: null,
  evaluated_bytes: 33,
  evaluated_steps: 6,
  notes: [],
};

describe("the Stepper pane's view of trace_values", () => {
  it("takes the engine's event as the protocol types it", () => {
    const parsed = parseEvent(EVENT);
    expect(parsed.ok && parsed.event.type).toBe("trace_values");
  });

  it("jumps to the Inf made by the div, then the NaN made by the mul, both on the sqrt line", () => {
    const bad = firstBad(EVENT as never);
    expect(bad.map((b) => [b.kind, b.row, b.primitive, b.line])).toEqual([
      ["Inf", 2, "div", 4],
      ["NaN", 5, "mul", 4],
    ]);
    expect(bad[1]!.fedBy).toEqual([4, 2]);
    expect(badText(bad[1]!)).toBe("First NaN: row 5, mul at line 4 (backward pass), fed by rows 4, 2");
    expect(firstBad({ ...EVENT, first_nan: null, first_inf: null, first_bad: null } as never)).toEqual([]);
  });

  it("draws a line per output, marks what holds a NaN or an Inf and what made one", () => {
    const lines = traceTable(EVENT as never);
    // the jit's two described outputs make two lines; the rest one each
    expect(lines.map((l) => l.row)).toEqual([0, 1, 2, 3, 4, 4, 5]);
    expect(lines.every((l) => l.cells.length === COLUMNS.length)).toBe(true);
    expect(lines.filter((l) => l.bad).map((l) => l.row)).toEqual([2, 5]);
    expect(lines.filter((l) => l.made).map((l) => l.row)).toEqual([2, 5]);
    const div = lines[2]!;
    expect(div.cells.slice(0, 4)).toEqual(["2", "2", "div", "4"]);
    expect(div.cells.slice(7, 13)).toEqual(["—", "—", "—", "0", "1", "1"]);
    // the jit shows 2 of its 3 outputs and says so; its second line carries no row cells
    expect(lines[4]!.cells[6]).toBe("float32[] (+1)");
    expect(lines[5]!.head).toBe(false);
    expect(lines[5]!.cells.slice(0, 6)).toEqual(["", "", "", "", "", ""]);
  });

  it("shows loop rows by iteration, or how many iterations they summarise", () => {
    const row = (extra: Record<string, unknown>) => ({ ...EVENT.rows[1]!, ...extra });
    const lines = traceTable({ ...EVENT, rows: [row({ iteration: 2 }), row({ iterations: 20 })] } as never);
    expect(lines.map((l) => l.cells[5])).toEqual(["2", "×20"]);
  });

  it("formats numbers briefly and names what is not one", () => {
    expect([fmtNumber(null), fmtNumber(3), fmtNumber(0.1234567), fmtNumber(1.5e20), fmtNumber("nan")]).toEqual(["—", "3", "0.123457", "1.5e+20", "nan"]);
  });
});
