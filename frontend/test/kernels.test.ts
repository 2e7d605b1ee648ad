// The kernels pane's grid map: where each grid point is drawn and the block of each
// operand it touches (the hover), for a 2 x 2-grid tiled matmul as the engine sends it.
import { describe, expect, it } from "vitest";
import { DEFAULT_STATE, EXAMPLES } from "../src/model/examples";
import { blockLabel, blockLines, blockRect, cellOf, gridLayout, lineMap, pointIndex, type KernelsEvent } from "../src/panes/kernel-grid";
import { parseEvent } from "../src/connection/protocol";
import { fromRequest, toRequest } from "../src/model/state";

function matmul(): KernelsEvent {
  const parsed = parseEvent({
    type: "kernels",
    kernels: [
      {
        name: "matmul_kernel at snippet.py:15",
        line: 15,
        jaxpr: "{ lambda ; a b c. let\n    c[...] <- d\n  in () }",
        jaxpr_sources: [{ out_line: 2, line: 16 }],
        grid: [2, 2],
        points: 4,
        operands: [
          { origin: "args[0]", kind: "in", shape: [256, 256], dtype: "float32", block_shape: [128, 256], starts: [[0, 0], [0, 0], [128, 0], [128, 0]] },
          { origin: "args[1]", kind: "in", shape: [256, 256], dtype: "float32", block_shape: [256, 128], starts: [[0, 0], [0, 128], [0, 0], [0, 128]] },
          { origin: "outputs", kind: "out", shape: [256, 256], dtype: "float32", block_shape: [128, 128], starts: [[0, 0], [0, 128], [128, 0], [128, 128]] },
        ],
      },
    ],
  });
  if (!parsed.ok) throw new Error(parsed.why);
  if (parsed.event.type !== "kernels") throw new Error("not a kernels event");
  return parsed.event;
}

describe("the grid map", () => {
  it("lays the grid out as rows (its first dimension) and columns (the rest)", () => {
    expect(gridLayout([2, 2])).toEqual({ rows: 2, cols: 2 });
    expect(gridLayout([4])).toEqual({ rows: 1, cols: 4 });
    expect(gridLayout([])).toEqual({ rows: 1, cols: 1 });
    expect(gridLayout([2, 3, 4])).toEqual({ rows: 2, cols: 12 });
    expect([0, 1, 2, 3].map((p) => cellOf([2, 2], p))).toEqual([
      { row: 0, col: 0 }, { row: 0, col: 1 }, { row: 1, col: 0 }, { row: 1, col: 1 },
    ]);
    expect(pointIndex([2, 3, 4], 23)).toEqual([1, 2, 3]);
  });

  it("hovering grid point (1, 0) shows row block 1 of x, column block 0 of y, output block (1, 0)", () => {
    const [k] = matmul().kernels;
    const p = 2; // (1, 0), row-major
    expect(pointIndex(k!.grid, p)).toEqual([1, 0]);
    const [x, y, out] = k!.operands.map((op) => blockRect(op, p));
    expect(x).toEqual({ x: 0, y: 0.5, w: 1, h: 0.5 });
    expect(y).toEqual({ x: 0, y: 0, w: 0.5, h: 1 });
    expect(out).toEqual({ x: 0, y: 0.5, w: 0.5, h: 0.5 });
    expect(k!.operands.map((op) => blockLabel(op, p))).toEqual([
      "args[0][128:256, 0:256]", "args[1][0:256, 0:128]", "outputs[128:256, 0:128]",
    ]);
  });

  it("draws each operand's block boundaries and clips a block over the edge", () => {
    const [k] = matmul().kernels;
    expect(blockLines(k!.operands[2]!)).toEqual({ xs: [0.5], ys: [0.5] });
    const ragged = { origin: "x", kind: "in" as const, shape: [10], dtype: "float32", block_shape: [4], starts: [[0], [4], [8]] };
    const last = blockRect(ragged, 2)!; // elements 8:12 of 10: 8:10 drawn
    expect([last.x, last.y, last.h]).toEqual([0.8, 0, 1]);
    expect(last.w).toBeCloseTo(0.2, 12);
    expect(blockRect(ragged, 3)).toBeNull();
  });

  it("links the texts' lines to the code", () => {
    expect(lineMap(matmul().kernels[0]!.jaxpr_sources!).get(2)).toBe(16);
  });
});

describe("the Pallas interpret mode", () => {
  it("is sent only when it is not the default, and comes back from a stored request", () => {
    expect(toRequest(DEFAULT_STATE)).not.toHaveProperty("pallas_interpret");
    const races = toRequest({ ...DEFAULT_STATE, pallasInterpret: "tpu_races" });
    expect(races.pallas_interpret).toBe("tpu_races");
    expect(fromRequest(races, DEFAULT_STATE).pallasInterpret).toBe("tpu_races");
    expect(fromRequest({ ...races, pallas_interpret: "sideways" }, DEFAULT_STATE).pallasInterpret).toBe("auto");
  });

  it("is set by the race example, and left at auto by the others", () => {
    const byId = new Map(EXAMPLES.map((e) => [e.id, e.state.pallasInterpret]));
    expect(byId.get("pallas-race")).toBe("tpu_races");
    expect(byId.get("pallas-tiled-matmul")).toBe("auto");
    expect(toRequest({ ...EXAMPLES.find((e) => e.id === "pallas-race")!.state, backend: "cpu" }).pallas_interpret).toBe("tpu_races");
  });
});
