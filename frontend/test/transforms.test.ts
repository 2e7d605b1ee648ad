import { describe, expect, it } from "vitest";
import { describePipeline, formatJson, fromRequestTransforms, parseAxes, toRequestTransforms, type Step } from "../src/model/transforms";

describe("parseAxes", () => {
  it.each([
    ["0", 0],
    ["None", null],
    ["(None, 0, 0)", [null, 0, 0]],
    ["None, 0", [null, 0]],
    ["[0, (1, None)]", [0, [1, null]]],
    ["(0,)", [0]],
    ["-1", -1],
  ])("%s", (src, want) => expect(parseAxes(src)).toEqual(want));

  it.each(["", "(0", "0)", "x", "0 0", "{'a': 0}"])("rejects %j", (src) => expect(() => parseAxes(src)).toThrow());
});

describe("request transforms", () => {
  it("sends only what differs from JAX's defaults, spelled as JAX spells it", () => {
    const steps: Step[] = [
      { name: "grad", options: { argnums: "0, 1", has_aux: false } },
      { name: "vmap", options: { in_axes: "(None, 0)", axis_name: "batch" } },
      { name: "checkpoint", options: { prevent_cse: false, policy: "dots_saveable" } },
      { name: "jit", options: { static_argnames: "n", static_argnums: "" } },
    ];
    expect(toRequestTransforms(steps)).toEqual([
      { name: "grad", argnums: [0, 1] },
      { name: "vmap", in_axes: [null, 0], axis_name: "batch" },
      { name: "checkpoint", prevent_cse: false, policy: "dots_saveable" },
      { name: "jit", static_argnames: "n" },
    ]);
  });

  it("lists problems instead of sending them", () => {
    const problems: { step: number; option: string }[] = [];
    toRequestTransforms([{ name: "grad", options: { argnums: "x" } }], problems as never);
    expect(problems).toMatchObject([{ step: 0, option: "argnums" }]);
  });

  it("round-trips through a stored request", () => {
    const request = [
      { name: "vmap", in_axes: [null, 0, 0] },
      { name: "grad", argnums: 1, has_aux: true },
      { name: "bogus" },
    ];
    const steps = fromRequestTransforms(request);
    expect(steps).toEqual([
      { name: "vmap", options: { in_axes: "(None, 0, 0)" } },
      { name: "grad", options: { argnums: "1", has_aux: true } },
    ]);
    expect(toRequestTransforms(steps)).toEqual(request.slice(0, 2));
  });

  it("describes the pipeline as JAX composes it", () => {
    expect(describePipeline([{ name: "grad", options: {} }, { name: "jit", options: {} }])).toBe("jit(grad(f))");
    expect(describePipeline([{ name: "grad", options: {} }, { name: "vmap", options: { in_axes: "(None, 0)" } }], "loss")).toBe(
      "vmap(grad(loss), in_axes=(None, 0))",
    );
    expect(describePipeline([])).toBe("f");
    expect(formatJson([0])).toBe("(0,)");
  });
});
