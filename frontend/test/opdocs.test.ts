import { describe, expect, it } from "vitest";
import { embedIdFromPath } from "../src/app/embed";
import { docFor, opAt } from "../src/editor/opdocs";

describe("documentation on hover", () => {
  it("finds a jaxpr primitive only where an equation names it", () => {
    const line = "    e:f32[4,2] = tanh d";
    expect(opAt("jaxpr", line, line.indexOf("tanh") + 1)).toEqual({ op: "tanh", from: 17, to: 21 });
    // variables can be named like primitives (`ne`, `or`): not documented
    const vars = "    or:bool[] = ne a b";
    expect(opAt("jaxpr", vars, 5)).toBeNull();
    expect(opAt("jaxpr", vars, vars.indexOf("ne") + 1)?.op).toBe("ne");
  });

  it("finds StableHLO ops by their dialect prefix and HLO opcodes before their operands", () => {
    const mlir = "    %2 = stablehlo.tanh %1 : tensor<4x2xf32>";
    expect(opAt("stablehlo", mlir, mlir.indexOf("tanh"))?.op).toBe("stablehlo.tanh");
    const hlo = "  %tanh.0 = f32[3]{0} tanh(%mul.2), metadata={}";
    expect(opAt("hlo", hlo, 4)).toBeNull(); // the instruction's name
    expect(opAt("hlo", hlo, hlo.indexOf("tanh(") + 1)?.op).toBe("tanh");
    const tuple = "  %t = (f32[], s32[]) get-tuple-element(%x), index=0";
    expect(opAt("hlo", tuple, tuple.indexOf("get-tuple") + 3)?.op).toBe("get-tuple-element");
  });

  it("documents primitives with their rules and link, ops with the spec's words", () => {
    const sin = docFor("jaxpr", "sin")!;
    expect(sin.summary).toMatch(/sine/i);
    expect(sin.transforms).toEqual(expect.arrayContaining(["jvp", "vmap", "lowering"]));
    expect(sin.url).toBe("https://docs.jax.dev/en/latest/_autosummary/jax.lax.sin.html");
    expect(docFor("jaxpr", "scan")!.signature).toContain("jax.lax.scan(");
    expect(docFor("stablehlo", "stablehlo.add")!.url).toBe("https://openxla.org/stablehlo/spec#add");
    expect(docFor("hlo", "multiply")!.summary).toMatch(/element-wise product/);
    expect(docFor("hlo", "dot")!.summary).toMatch(/dot products/);
    expect(docFor("hlo", "fusion")!.summary).toMatch(/fused/);
    expect(docFor("jaxpr", "no_such_primitive")).toBeNull();
  });
});

describe("embed view", () => {
  it("knows its path", () => {
    expect(embedIdFromPath("/e/abc_12-Z")).toBe("abc_12-Z");
    expect(embedIdFromPath("/s/abc")).toBeNull();
    expect(embedIdFromPath("/e/../x")).toBeNull();
  });
});
