// The big arrays' one-loop checks (src/util/fast-checks.ts): the same bounds the events'
// JSON Schema gives, through the generated event schemas the page parses with.
import { describe, expect, it } from "vitest";
import { parseEvent } from "../src/connection/protocol";

const jaxpr = (sources: unknown): ReturnType<typeof parseEvent> => parseEvent({ type: "jaxpr", text: "x", sources });

describe("a source map's rows", () => {
  it("pass with their fields, and an unknown field is dropped as zod's object drops it", () => {
    const parsed = jaxpr([{ out_line: 1, line: 2, eqn: 0 }, { out_line: 3, line: 4, eqn: null }, { out_line: 5, line: 6, sneaky: "<b>" }]);
    expect(parsed.ok && parsed.event.type === "jaxpr" && parsed.event.sources).toEqual([
      { out_line: 1, line: 2, eqn: 0 },
      { out_line: 3, line: 4, eqn: null },
      { out_line: 5, line: 6 },
    ]);
  });

  it.each([
    ["a line below 1", [{ out_line: 1, line: 0 }]],
    ["a line past the bound", [{ out_line: 1, line: 10_000_001 }]],
    ["a fraction", [{ out_line: 1.5, line: 2 }]],
    ["a string", [{ out_line: "1", line: 2 }]],
    ["a missing required field", [{ line: 2 }]],
    ["null where none is allowed", [{ out_line: null, line: 2 }]],
    ["a row that is not an object", [[1, 2]]],
    ["not an array", { out_line: 1, line: 2 }],
    ["a negative equation", [{ out_line: 1, line: 2, eqn: -1 }]],
  ])("refuse %s", (_what, sources) => {
    const parsed = jaxpr(sources);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.why).toMatch(/^jaxpr: /);
  });

  it("refuse more rows than the schema's maximum", () => {
    const rows = Array.from({ length: 65_537 }, (_, i) => ({ out_line: i + 1, line: 1 }));
    expect(jaxpr(rows).ok).toBe(false);
    expect(jaxpr(rows.slice(0, 65_536)).ok).toBe(true);
  });
});

const value = (data: unknown): ReturnType<typeof parseEvent> =>
  parseEvent({ type: "value", repr: "r", tree: [{ path: "[0]", shape: [3], dtype: "float32", data }] });

describe("a leaf's values (a big array of JSON scalars, one compiled check)", () => {
  it("pass as numbers, booleans, the non-finite names, complex pairs and strings", () => {
    const data = [1, -2.5, true, "nan", "-inf", [1, "inf"], "2024-01-01", 18446744073709551615];
    const parsed = value(data);
    expect(parsed.ok && parsed.event.type === "value" && parsed.event.tree[0]!.data).toEqual(data);
    expect(value(null).ok).toBe(true);
    expect(value(undefined).ok).toBe(true);
  });

  it.each([
    ["an object", [{ x: 1 }]],
    ["a pair of three", [[1, 2, 3]]],
    ["a pair holding a boolean", [[1, true]]],
    ["a string past 256 characters", ["x".repeat(257)]],
    ["more than 256 values", Array.from({ length: 257 }, () => 0)],
    ["not an array", 3],
  ])("refuse %s", (_what, data) => {
    const parsed = value(data);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.why).toMatch(/^value: .*at most 256 items/s);
  });
});
