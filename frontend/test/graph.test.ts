import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseHlo } from "../src/graph/hlo";
import { parseJaxpr } from "../src/graph/jaxpr";
import { countNodes, type GraphNode } from "../src/graph/model";

const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8");

function find(nodes: GraphNode[], pred: (n: GraphNode) => boolean): GraphNode[] {
  const out: GraphNode[] = [];
  for (const n of nodes) {
    if (pred(n)) out.push(n);
    if (n.children) out.push(...find(n.children, pred));
  }
  return out;
}

describe("jaxpr graph", () => {
  it("reads a flat jaxpr into ops and data edges", () => {
    const text = "{ lambda ; a:f32[3]. let\n    b:f32[3] = cos a\n    c:f32[3] = integer_pow[y=3] b\n    d:f32[] = reduce_sum[axes=(0,) out_sharding=None] c\n  in (d,) }";
    const g = parseJaxpr(text);
    expect(g.nodes.map((n) => [n.kind, n.label, n.outLine])).toEqual([
      ["input", "a", 1],
      ["op", "cos", 2],
      ["op", "integer_pow", 3],
      ["op", "reduce_sum", 4],
      ["output", "out", null],
    ]);
    expect(g.edges).toEqual([
      { from: "in0", to: "e0" },
      { from: "e0", to: "e1" },
      { from: "e1", to: "e2" },
      { from: "e2", to: "out" },
    ]);
    expect(g.nodes[2]!.detail).toBe("y=3 → f32[3]");
  });

  it("makes groups of jit, cond's branches, scan, while and custom_jvp, with their lines", () => {
    const text = fixture("nested.jaxpr.txt");
    const g = parseJaxpr(text);
    const groups = find(g.nodes, (n) => n.kind === "group");
    expect(groups.map((n) => n.label)).toEqual(["jit", "jit", "cond", "branches[0]", "branches[1]", "scan", "custom_jvp_call", "while", "body_jaxpr", "cond_jaxpr"]);
    const lines = text.split("\n");
    for (const n of find(g.nodes, (x) => x.kind === "op" || x.kind === "group")) {
      if (n.op) expect(lines[n.outLine! - 1]).toContain(n.op);
    }
    const sin = find(g.nodes, (n) => n.label === "sin")[0]!;
    expect(lines[sin.outLine! - 1]!.trim()).toBe("d:f32[4] = sin a");
    // inside the scan body: the custom_jvp_call feeds the add
    const scan = groups.find((n) => n.label === "scan")!;
    const call = scan.children!.find((n) => n.label === "custom_jvp_call")!;
    const add = scan.children!.find((n) => n.label === "add")!;
    expect(scan.edges).toContainEqual({ from: call.id, to: add.id });
    expect(find(call.children!, (n) => n.label === "log1p")).toHaveLength(1);
  });

  it("draws shared jaxprs (let _name = ...) where they are used", () => {
    const g = parseJaxpr(fixture("shared.jaxpr.txt"));
    expect(find(g.nodes, (n) => n.label === "random_bits")).toHaveLength(1);
    expect(find(g.nodes, (n) => n.label === "erf_inv")).toHaveLength(1);
  });

  it("says what it could not read (the pane shows it)", () => {
    expect(() => parseJaxpr("{ lambda ; a:f32[3]. let b = ")).toThrow();
  });
});

describe("HLO graph", () => {
  it("reads the ENTRY computation with fusions, calls, whiles and conditionals as groups", () => {
    const text = fixture("nested.hlo.txt");
    const g = parseHlo(text);
    const lines = text.split("\n");
    const top = g.nodes.map((n) => n.label);
    expect(top[0]).toBe("x.1");
    expect(top).toContain("conditional");
    expect(top.filter((l) => l === "call")).toHaveLength(2);
    const fusions = find(g.nodes, (n) => n.kind === "group" && n.label.startsWith("fusion"));
    expect(fusions.length).toBeGreaterThanOrEqual(5);
    expect(find(g.nodes, (n) => n.label === "sine").length).toBeGreaterThan(0);
    const whiles = find(g.nodes, (n) => n.label === "while");
    expect(whiles.map((w) => w.children!.map((c) => c.label))).toEqual([["condition", "body"], ["condition", "body"]]);
    for (const n of find(g.nodes, (x) => x.kind === "op")) expect(lines[n.outLine! - 1]).toContain(` ${n.op}(`);
    // the root's operands are edges into it
    const root = g.nodes.at(-1)!;
    expect(g.edges.filter((e) => e.to === root.id)).toHaveLength(2);
    expect(countNodes(g.nodes)).toBeGreaterThan(60);
  });

  it("gives an empty graph for text without an ENTRY computation", () => {
    expect(parseHlo("not hlo").nodes).toEqual([]);
  });
});

describe("graph size", () => {
  it("counts the nodes drawn with groups collapsed or open", async () => {
    const { drawnNodes } = await import("../src/graph/model");
    const g = parseJaxpr(fixture("nested.jaxpr.txt"));
    const all = drawnNodes(g.nodes, () => false);
    expect(all).toBe(countNodes(g.nodes));
    expect(drawnNodes(g.nodes, () => true)).toBe(g.nodes.length);
  });
});

describe("jaxpr graph: a variable named `in`", () => {
  it("reads on past an argument called in (the 1,000-layer MLP's broadcast_in_dim[...] in)", () => {
    const text = "{ lambda ; a:f32[3] in:f32[3]. let\n    b:f32[3] = add in a\n    c:f32[3] = mul b in\n    d:f32[3] = sin in\n  in (c, d) }";
    const g = parseJaxpr(text);
    expect(g.nodes.map((n) => n.label)).toEqual(["a", "in", "add", "mul", "sin", "out"]);
    expect(g.edges).toContainEqual({ from: "in1", to: "e0" });
    expect(g.edges).toContainEqual({ from: "in1", to: "e2" });
    expect(g.edges).toContainEqual({ from: "e2", to: "out" });
  });
});
