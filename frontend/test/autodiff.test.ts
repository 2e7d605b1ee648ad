// The Autodiff pane's parts that need no DOM: the stages as tabs with their source
// maps, each path's heading, the residual and policy rows.
import { describe, expect, it } from "vitest";
import { parseEvent } from "../src/connection/protocol";
import { pathSummary, policyCells, residualCells, stageTabs, type AutodiffEvent } from "../src/panes/autodiff";

const FORWARD = "{ lambda ; a:f32[8]. let\n    b:f32[8] = sin a\n    c:f32[8] = cos a\n  in (b, a, c) }";
const residual = (name: string, source: string, line: number | null) => ({ name, shape: [8], dtype: "float32", bytes: 32, line, source });

function autodiff(): AutodiffEvent {
  const parsed = parseEvent({
    type: "autodiff",
    transform: "grad",
    function: "checkpoint(f)",
    wrt: ["x"],
    stages: [
      { path: "direct", stage: "forward", title: "forward pass (jax.vjp)", text: FORWARD, sources: [{ out_line: 2, line: 4, eqn: 0 }, { out_line: 3, line: 4, eqn: 1 }] },
      { path: "classic", stage: "jvp", title: "JVP jaxpr (jax.jvp)", text: "{ lambda ; a:f32[8] b:f32[8]. let  in (a, b) }", sources: [] },
    ],
    paths: [
      { path: "direct", status: "ok", default: true, note: null, residuals: [residual("a", "input x", null), residual("c", "cos", 4)], residual_bytes: 32 },
      { path: "classic", status: "failed", default: false, note: "NotImplementedError: no rule", residuals: [], residual_bytes: 0 },
    ],
    policies: [
      { policy: "nothing_saveable", current: false, residuals: 1, residual_bytes: 0, flops_backward: 15200, flops_recomputed: 6816 },
      { policy: "dots_saveable", current: true, residuals: 4, residual_bytes: 640, flops_backward: 9056, flops_recomputed: null },
    ],
    flops_source: "XLA's cost analysis",
    notes: [],
  });
  if (!parsed.ok) throw new Error(parsed.why);
  return parsed.event as AutodiffEvent;
}

describe("the autodiff pane", () => {
  it("makes one tab per stage, labelled with its path, with its lines linked to the code", () => {
    const tabs = stageTabs(autodiff());
    expect(tabs.map((t) => [t.key, t.label])).toEqual([
      ["direct/forward", "direct · forward"],
      ["classic/jvp", "classic · JVP"],
    ]);
    expect(tabs[0]!.text).toBe(FORWARD);
    expect([...tabs[0]!.sources]).toEqual([[2, 4], [3, 4]]);
    expect(tabs[1]!.sources.size).toBe(0);
  });

  it("says per path whether JAX takes it by default, what it saves, or why it is missing", () => {
    const [direct, classic] = autodiff().paths;
    expect(pathSummary(direct!)).toBe("direct linearization — JAX's default: 2 residuals, 32 B computed");
    expect(pathSummary(classic!)).toBe("classic (JVP + partial eval + transpose): failed (NotImplementedError: no rule)");
  });

  it("lists each residual with its aval, bytes, maker and line", () => {
    const rows = autodiff().paths[0]!.residuals.map(residualCells);
    expect(rows).toEqual([
      ["a", "float32[8]", "32 B", "input x", "—"],
      ["c", "float32[8]", "32 B", "cos", "4"],
    ]);
  });

  it("compares the checkpoint policies, starring the pipeline's own", () => {
    expect(autodiff().policies!.map(policyCells)).toEqual([
      ["nothing_saveable", "1", "0 B", "15.2K", "6816"],
      ["dots_saveable ★", "4", "640 B", "9056", "—"],
    ]);
  });
});
