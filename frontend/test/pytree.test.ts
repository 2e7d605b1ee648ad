// The path parser on the spellings jax.tree_util.keystr writes (measured with JAX 0.10:
// a dict, a list, a namedtuple, Flax NNX state, a Linen variables dict, an Equinox MLP,
// keystr((FlattenedIndexKey(3), GetAttrKey("x"), SequenceKey(0), DictKey("k"),
// DictKey(1), DictKey(None), DictKey((1, 2))))), and the tree grouped with its sums.
import { describe, expect, it } from "vitest";
import { buildTree, dtypeBytes, fmtBytes, fmtCount, parsePath, type TreeLeaf, type TreeNode } from "../src/panes/pytree";

const kinds = (p: string): string[] => parsePath(p).map((s) => `${s.kind}:${s.name}`);

describe("parsePath", () => {
  it("reads dict keys, indices and attributes", () => {
    expect(kinds("['b'][1][0]")).toEqual(["key:b", "index:1", "index:0"]);
    expect(kinds(".layers[0].weight")).toEqual(["attr:layers", "index:0", "attr:weight"]);
    expect(kinds("['layers'][0]['kernel'].value")).toEqual(["key:layers", "index:0", "key:kernel", "attr:value"]);
    expect(kinds("['params']['bias']")).toEqual(["key:params", "key:bias"]);
    expect(kinds(".w")).toEqual(["attr:w"]);
  });

  it("reads keys whose text looks like a path, and quoted quotes", () => {
    expect(kinds("['a.b[0]']")).toEqual(["key:a.b[0]"]);
    expect(kinds(`["we'ird"]`)).toEqual(["key:we'ird"]);
    expect(kinds(`['q"x']`)).toEqual(['key:q"x']);
    expect(kinds(String.raw`['a\'b\\c\n']`)).toEqual(["key:a'b\\c\n"]);
    expect(kinds("['k]'][0]")).toEqual(["key:k]", "index:0"]);
  });

  it("reads flattened-index keys, None and tuple keys as keystr writes them", () => {
    expect(kinds("[<flat index 3>].x[0]['k'][1][None][(1, 2)]")).toEqual([
      "flat:#3",
      "attr:x",
      "index:0",
      "key:k",
      "index:1",
      "key:None",
      "key:(1, 2)",
    ]);
    expect(kinds("[(1, ']')]")).toEqual(["key:(1, ']')"]);
  });

  it("keeps the text of every segment, so the segments spell the path again", () => {
    for (const p of ["['layers'][0]['kernel'].value", ".layers[0].weight", "[<flat index 3>].x[None]", "['a'][-1]"]) {
      expect(parsePath(p).map((s) => s.text).join("")).toBe(p);
    }
  });

  it("keeps a path cut mid-key as one raw segment, and the root as no segment", () => {
    expect(kinds("['layers'][0]['ker")).toEqual(["key:layers", "index:0", "raw:['ker"]);
    expect(kinds(".a[")).toEqual(["attr:a", "raw:["]);
    expect(kinds(".")).toEqual(["raw:."]);
    expect(parsePath("")).toEqual([]);
  });
});

describe("dtypeBytes", () => {
  it("sizes the dtypes JAX names", () => {
    expect(dtypeBytes("float32")).toBe(4);
    expect(dtypeBytes("bfloat16")).toBe(2);
    expect(dtypeBytes("int8")).toBe(1);
    expect(dtypeBytes("uint32")).toBe(4);
    expect(dtypeBytes("complex64")).toBe(8);
    expect(dtypeBytes("float8_e4m3fn")).toBe(1);
    expect(dtypeBytes("int4")).toBe(0.5);
    expect(dtypeBytes("bool")).toBe(1);
    expect(dtypeBytes("float0")).toBe(0);
    expect(dtypeBytes("key<fry>")).toBeNull();
    expect(dtypeBytes("object")).toBeNull();
  });
});

const leaf = (path: string, shape: number[], dtype = "float32"): TreeLeaf => ({ path, shape, dtype });
const labels = (n: TreeNode): unknown => (n.leaf ? n.label : { [n.label]: n.children.map(labels) });

describe("buildTree", () => {
  // the leaves of nnx.state of a model with two Linear layers and a BatchNorm
  const nnx = [
    leaf("['bn']['bias'].value", [3]),
    leaf("['bn']['mean'].value", [3]),
    leaf("['layers'][0]['bias'].value", [3]),
    leaf("['layers'][0]['kernel'].value", [2, 3]),
    leaf("['layers'][1]['bias'].value", [1]),
    leaf("['layers'][1]['kernel'].value", [3, 1], "bfloat16"),
  ];

  it("groups by path prefix, folding a Variable's .value into its key", () => {
    const root = buildTree(nnx);
    expect(labels(root)).toEqual({
      "": [
        { "['bn']": ["['bias'].value", "['mean'].value"] },
        { "['layers']": [{ "[0]": ["['bias'].value", "['kernel'].value"] }, { "[1]": ["['bias'].value", "['kernel'].value"] }] },
      ],
    });
    const layer1 = root.children[1]!.children[1]!;
    expect(layer1.path).toBe("['layers'][1]");
    expect(layer1.children[1]!.path).toBe("['layers'][1]['kernel'].value");
    expect(layer1.children[1]!.leaf).toBe(nnx[5]);
  });

  it("sums parameters and bytes over each node's leaves", () => {
    const root = buildTree(nnx);
    expect(root.leaves).toBe(6);
    expect(root.params).toBe(3 + 3 + 3 + 6 + 1 + 3);
    expect(root.bytes).toBe((3 + 3 + 3 + 6 + 1) * 4 + 3 * 2);
    const layers = root.children[1]!;
    expect([layers.leaves, layers.params, layers.bytes]).toEqual([4, 13, 10 * 4 + 3 * 2]);
    expect([layers.children[0]!.params, layers.children[0]!.bytes]).toEqual([9, 36]);
    expect(root.bytesKnown).toBe(true);
  });

  it("groups Equinox attributes, counts scalars as one element, marks unsized bytes", () => {
    const root = buildTree([
      leaf(".layers[0].weight", [4, 2]),
      leaf(".layers[0].bias", [4]),
      leaf(".layers[1].weight", [1, 4]),
      leaf(".step", [], "int32"),
      leaf(".key", [], "key<fry>"),
    ]);
    expect(labels(root)).toEqual({ "": [{ ".layers": [{ "[0]": [".weight", ".bias"] }, "[1].weight"] }, ".step", ".key"] });
    // [1] held one leaf: it is that leaf, labelled with both
    expect(root.params).toBe(8 + 4 + 4 + 1 + 1);
    expect(root.bytesKnown).toBe(false);
    expect(root.bytes).toBe((8 + 4 + 4) * 4 + 4);
    expect(root.children[0]!.bytesKnown).toBe(true);
  });

  it("shows a value that is one leaf, and an empty tree, under the root", () => {
    const one = buildTree([leaf("", [5])]);
    expect(one.children).toHaveLength(1);
    expect(one.children[0]!.leaf?.shape).toEqual([5]);
    expect(one.params).toBe(5);
    expect(buildTree([]).children).toEqual([]);
  });
});

describe("formats", () => {
  it("says counts and bytes", () => {
    expect(fmtCount(999)).toBe("999");
    expect(fmtCount(1234)).toBe("1.23 K");
    expect(fmtCount(5_300_000)).toBe("5.30 M");
    expect(fmtBytes(100)).toBe("100 B");
    expect(fmtBytes(2048)).toBe("2.00 KiB");
    expect(fmtBytes(2048, false)).toBe("≥ 2.00 KiB");
  });
});

describe("the Value pane's tree", async () => {
  const { defaultView, groupSummary } = await import("../src/panes/value");
  it("opens a model's parameters as a tree and a flat value as the table", () => {
    expect(defaultView([{ path: "['layers'][0]['kernel'].value" }])).toBe("tree");
    expect(defaultView([{ path: "[0]" }, { path: "[1]" }])).toBe("flat");
    expect(defaultView([{ path: "" }])).toBe("flat");
  });
  it("says a group's parameters, bytes and leaves", () => {
    const root = buildTree([leaf(".w", [1000, 3]), leaf(".b", [3])]);
    expect(groupSummary(root)).toBe("3.00 K params · 11.7 KiB · 2 leaves");
  });
});

describe("the tree of real values (fixtures: `jaxplay run examples/… --output value --json`)", async () => {
  const { readFileSync } = await import("node:fs");
  const { parseEvent } = await import("../src/connection/protocol");
  const valueOf = (name: string) => {
    const lines = readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8").split("\n").filter(Boolean);
    for (const line of lines) {
      const p = parseEvent(JSON.parse(line));
      if (p.ok && p.event.type === "value") return p.event;
    }
    throw new Error(`${name}: no value event`);
  };

  it("groups a Flax NNX state by module, each Variable's .value folded into its key", () => {
    const value = valueOf("flax_nnx_state_value.jsonl");
    const root = buildTree(value.tree);
    // each leaf's count and bytes as Flax's own repr of the state says them (`# 24 (96 B)`)
    const flax = [...value.repr.matchAll(/# (\d+) \((\d+) B\)/g)].map((m) => [Number(m[1]), Number(m[2])]);
    expect(flax).toHaveLength(4);
    expect(root.children.flatMap((c) => c.children.map((l) => [l.params, l.bytes]))).toEqual(flax);
    expect(labels(root)).toEqual({ "": [{ "['hidden']": ["['bias'].value", "['kernel'].value"] }, { "['out']": ["['bias'].value", "['kernel'].value"] }] });
    // Linear(3, 8) and Linear(8, 1): the counts Flax's own repr gives (`# 8 (32 B)`)
    expect(root.children.map((c) => [c.params, c.bytes])).toEqual([
      [8 + 24, (8 + 24) * 4],
      [1 + 8, 9 * 4],
    ]);
    expect(root.params).toBe(41);
  });

  it("groups an Equinox MLP's gradients by layer", () => {
    const root = buildTree(valueOf("equinox_grads_value.jsonl").tree);
    expect(labels(root)).toEqual({ "": [{ ".layers": ["[0]", "[1]", "[2]"].map((k) => ({ [k]: [".weight", ".bias"] })) }] });
    expect(root.children[0]!.children.map((c) => c.params)).toEqual([16 * 2 + 16, 16 * 16 + 16, 16 + 1]);
  });
});
