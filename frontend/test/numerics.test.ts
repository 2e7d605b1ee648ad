import { describe, expect, it } from "vitest";
import { parseEvent } from "../src/connection/protocol";
import { COLUMNS, errorText, fmt, numericsTable } from "../src/panes/numerics";
import { bornLevel, numericsDecorations } from "../src/editor/editor-numerics";

// The event the engine makes for `(1 - cos(x)) / x**2` at [1e-3, 1e-2, 1] in float32
// (cos on line 4, the sub on 5, the div on 6), as tests/engine/test_numerics.py runs it.
const err = (max: number, ulp: number) => ({ max, median: max, max_ulp: ulp, median_ulp: ulp, norm: max });
const row = (eqn: string, primitive: string, line: number, error: ReturnType<typeof err>, born: ReturnType<typeof err>, hint: unknown = null) => ({
  eqn, primitive, depth: 0, line, phase: null, iterations: null, dtype: "float32", shape: [3], error, born, shadowed: true, unshadowed: null, diverged: 0, hint,
});
const EVENT = {
  type: "numerics",
  pipeline: "main",
  backend: "cpu",
  rows: [
    row("0", "cos", 4, err(5.4e-8, 0.49), err(5.4e-8, 0.49)),
    row("1", "sub", 5, err(0.04633, 777200), err(0.04633, 777200), { kind: "cancellation", text: "a - b with a ≈ b: about 21 leading bits cancel" }),
    row("2", "integer_pow", 6, err(4e-8, 0.5), err(4e-8, 0.5)),
    row("3", "div", 6, err(0.04633, 777200), err(3.6e-8, 0.6)),
  ],
  lines: [
    { line: 4, born_ulp: 0.49, error: 5.4e-8, hint: null },
    { line: 5, born_ulp: 777200, error: 0.04633, hint: "cancellation" },
    { line: 6, born_ulp: 0.6, error: 0.04633, hint: null },
  ],
  outputs: [{ path: "", dtype: "float32", shape: [3], run: err(0.04633, 777200), eager: err(0.04633, 777200) }],
  worst_born: 1,
  cut: null,
  refused: null,
  shadow_ms: 80.5,
  jit: null,
  precision: [],
  precision_note: null,
  notes: [],
};

describe("the Numerics pane's view of the numerics event", () => {
  it("takes the engine's event as the protocol types it", () => {
    const parsed = parseEvent(EVENT);
    expect(parsed.ok ? parsed.event.type : parsed.why).toBe("numerics");
  });

  it("has a row per equation with its error and born columns, the worst and its hint marked", () => {
    const parsed = parseEvent(EVENT);
    if (!parsed.ok) throw new Error(parsed.why);
    const table = numericsTable(parsed.event as never);
    expect(table.map((r) => r.cells[2])).toEqual(["cos", "sub", "integer_pow", "div"]);
    expect(table[1]!.cells.length).toBe(COLUMNS.length);
    expect(table[1]!.cells.slice(6)).toEqual(["0.0463", "7.77e+5", "0.0463", "7.77e+5"]);
    expect(table.map((r) => r.level)).toEqual([0, 3, 0, 0]);
    expect(table.filter((r) => r.worst).map((r) => r.row)).toEqual([1]);
    expect(table[1]!.hint).toContain("a ≈ b");
    expect(table[3]!.hint).toBeNull();
  });

  it("writes figures short, and names what is not a number", () => {
    expect(fmt(0)).toBe("0");
    expect(fmt("inf")).toBe("inf");
    expect(fmt(5.4e-8)).toBe("5.40e-8");
    expect(errorText(null)).toBe("—");
    expect(errorText(err(0.04633, 777200))).toBe("0.0463 (7.77e+5 ulp)");
  });

  it("bands an editor line by the ulps born there", () => {
    expect([0.5, 3, 64, 70000, "inf", "nan"].map(bornLevel)).toEqual([0, 1, 2, 3, 4, 4]);
    const doc = { lines: 6, line: (n: number) => ({ from: n * 10 }) };
    const marks = EVENT.lines.map((l) => ({ line: l.line, bornUlp: l.born_ulp, hint: l.hint }));
    const banded: number[] = [];
    numericsDecorations(doc, marks).between(0, 100, (from) => void banded.push(from / 10));
    expect(banded).toEqual([5]);
  });
});

describe("the Numerics pane's precision settings", () => {
  it("writes a setting's per-line errors, and nothing for one not stepped per line", async () => {
    const { settingLines } = await import("../src/panes/numerics");
    const base = { setting: "tpu_default", label: "TPU default", emulated: true, outputs: [], error: null };
    expect(settingLines({ ...base, lines: [{ line: 5, born_ulp: 3e4, error: 0.0046, hint: null }, { line: 7, born_ulp: 2, error: 1.2e-7, hint: null }] })).toBe("5: 0.0046 · 7: 1.20e-7");
    expect(settingLines({ ...base, lines: [] })).toBe("");
  });
});
