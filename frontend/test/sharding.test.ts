import { describe, expect, it } from "vitest";
import {
  collectiveRows,
  originText,
  rematerializationRows,
  deviceColour,
  gridCells,
  meshToJson,
  parseSpec,
  shardingFromRequest,
  shardingRequest,
  type ShardingEvent,
} from "../src/model/sharding-studio";
import { pmapAsShardMap } from "../src/model/pmap";
import { fromRequestTransforms, toRequestTransforms, type Step } from "../src/model/transforms";

const AXES = ["x", "y"];

describe("the mesh builder", () => {
  it("turns the typed shape and names into the request's mesh", () => {
    expect(meshToJson({ shape: "2, 2", names: "x, y", types: ["explicit"] })).toEqual({
      shape: [2, 2],
      axis_names: ["x", "y"],
      axis_types: ["explicit", "auto"],
    });
    expect(meshToJson({ shape: "2x4", names: "'data' 'model'", types: [] }).shape).toEqual([2, 4]);
  });

  it.each([
    [{ shape: "2, 2", names: "x", types: [] }, "2 sizes but 1 axis names"],
    [{ shape: "2, 0", names: "x, y", types: [] }, "not a positive whole number"],
    [{ shape: "2, 2", names: "x, x", types: [] }, "repeated"],
    [{ shape: "", names: "", types: [] }, "1 to 4 sizes"],
  ])("says what is wrong with %j", (mesh, says) => expect(() => meshToJson(mesh as never)).toThrow(says));
});

describe("PartitionSpec boxes", () => {
  it.each([
    ["x, None", ["x", null]],
    ["P('x', 'y')", ["x", "y"]],
    ["PartitionSpec(None, 'y')", [null, "y"]],
    ["('x', 'y'), None", [["x", "y"], null]],
    ["P()", []],
    ["[]", []],
    ["", null],
    ["None", null],
  ])("%s", (text, want) => expect(parseSpec(text, AXES)).toEqual(want));

  it.each([
    ["z", "not an axis of the mesh"],
    ["x, x", "used twice"],
    ["x; y", "not an axis name"],
  ])("refuses %s", (text, says) => expect(() => parseSpec(text, AXES)).toThrow(says));

  it("makes the request's fields, listing problems per argument instead of sending them", () => {
    const state = { mesh: { shape: "2, 2", names: "x, y", types: ["auto", "auto"] as const }, inShardings: ["x, y", "", "q"], outShardings: "P()" };
    const problems: { field: string }[] = [];
    const fields = shardingRequest({ ...state, mesh: { ...state.mesh, types: [...state.mesh.types] } }, problems as never);
    expect(fields.mesh).toEqual({ shape: [2, 2], axis_names: ["x", "y"], axis_types: ["auto", "auto"] });
    expect(fields.in_shardings).toEqual([["x", "y"], null]);
    expect(fields.out_shardings).toEqual([[]]);
    expect(problems).toMatchObject([{ field: "in_shardings[2]" }]);
  });

  it("sends nothing without a mesh, and round-trips a stored request", () => {
    expect(shardingRequest({ mesh: null, inShardings: ["x"], outShardings: "" })).toEqual({});
    const back = shardingFromRequest({ mesh: { shape: [4], axis_names: ["i"], axis_types: ["explicit"] }, in_shardings: [["i", null], null], out_shardings: [["i"]] });
    expect(back).toEqual({ mesh: { shape: "4", names: "i", types: ["explicit"] }, inShardings: ["P('i', None)", ""], outShardings: "P('i')" });
    expect(shardingRequest(back)).toEqual({ mesh: { shape: [4], axis_names: ["i"], axis_types: ["explicit"] }, in_shardings: [["i", null], null], out_shardings: [["i"]] });
  });
});

describe("shard_map steps", () => {
  it("send their specs as lists of PartitionSpecs and read them back", () => {
    const steps: Step[] = [{ name: "shard_map", options: { in_specs: "P('i'), P()", out_specs: "P('i')" } }];
    const sent = toRequestTransforms(steps);
    expect(sent).toEqual([{ name: "shard_map", in_specs: [["i"], []], out_specs: [["i"]] }]);
    expect(toRequestTransforms(fromRequestTransforms(sent))).toEqual(sent);
  });

  it("turns a pmap step into its shard_map form over a 1-D mesh", () => {
    const form = pmapAsShardMap({ name: "pmap", options: { axis_name: "devices", in_axes: "(0, None)" } }, 2, 4);
    expect(form.mesh).toEqual({ shape: "4", names: "devices", types: ["auto"] });
    expect(toRequestTransforms(form.steps)).toEqual([
      { name: "shard_map", in_specs: [["devices"], []], out_specs: [["devices"]] },
      { name: "jit" },
    ]);
    const plain = pmapAsShardMap({ name: "pmap", options: {} }, 1, 2);
    expect(toRequestTransforms(plain.steps)[0]).toEqual({ name: "shard_map", in_specs: [["i"]], out_specs: [["i"]] });
  });
});

const EVENT: ShardingEvent = {
  type: "sharding",
  pipeline: "main",
  devices: 4,
  arguments: [
    {
      path: "[0]",
      shape: [8, 4],
      dtype: "float32",
      spec: ["x", "y"],
      sharding: "NamedSharding",
      grid: [
        { start: [0, 0], stop: [4, 2], devices: [0] },
        { start: [0, 2], stop: [4, 4], devices: [1] },
        { start: [4, 0], stop: [8, 2], devices: [2] },
        { start: [4, 2], stop: [8, 4], devices: [3] },
      ],
    },
    { path: "[1]", shape: [4], dtype: "float32", spec: [null], sharding: "NamedSharding", grid: [{ start: [0], stop: [4], devices: [0, 1, 2, 3] }] },
  ],
  outputs: [],
  collectives: [
    { kind: "all-reduce", bytes: 32, shape: "f32[4,2]", replica_groups: [[0, 1], [2, 3]], groups_text: "replica_groups=[2,2]<=[4]", line: 2, hlo_line: 33 },
    { kind: "all-gather", bytes: 2048, shape: "f32[8,64]", replica_groups: null, groups_text: "replica_groups=odd", line: null, hlo_line: 35 },
  ],
};

describe("the sharding pane", () => {
  it("draws a 2-D array's blocks where they lie, each with its devices", () => {
    const cells = gridCells(EVENT.arguments[0]!);
    expect(cells.map((c) => [c.x, c.y, c.w, c.h, c.devices])).toEqual([
      [0, 0, 0.5, 0.5, [0]],
      [0.5, 0, 0.5, 0.5, [1]],
      [0, 0.5, 0.5, 0.5, [2]],
      [0.5, 0.5, 0.5, 0.5, [3]],
    ]);
    expect(cells[3]!.label).toBe("[4:8, 2:4]");
  });

  it("draws a replicated 1-D array as one row held by every device", () => {
    expect(gridCells(EVENT.arguments[1]!)).toEqual([{ x: 0, y: 0, w: 1, h: 1, devices: [0, 1, 2, 3], label: "[0:4]" }]);
  });

  it("merges blocks of further dimensions into the cell they fall in", () => {
    const cube = { ...EVENT.arguments[1]!, shape: [2, 2, 2], grid: [
      { start: [0, 0, 0], stop: [2, 2, 1], devices: [0] },
      { start: [0, 0, 1], stop: [2, 2, 2], devices: [1] },
    ] };
    expect(gridCells(cube).map((c) => c.devices)).toEqual([[0, 1]]);
  });

  it("gives each device its own colour", () => {
    const colours = [0, 1, 2, 3].map((d) => deviceColour(d, 4));
    expect(new Set(colours).size).toBe(4);
    expect(deviceColour(2, 4)).toBe(deviceColour(2, 4));
  });

  it("gives each collective the shardings that forced it, and lists XLA's rematerializations", () => {
    const argument = { kind: "argument" as const, name: "a", line: 2, sharding: "P('x', None)", axes: ["x"] };
    const constraint = { kind: "constraint" as const, name: "with_sharding_constraint", line: 4, sharding: "P(None, 'x')", axes: ["x"] };
    const event = {
      ...EVENT,
      collectives: [{ ...EVENT.collectives[0]!, origin: { from: [argument], to: [constraint] } }, { ...EVENT.collectives[1]!, origin: null }],
      origins_note: null,
      rematerializations: [{ line: 3, from_sharding: "{devices=[1,2]0,1}", to_sharding: "{devices=[2,1]0,1}", op_name: "jit(f)/sharding_constraint", instruction: "%copy", message: "[SPMD] Involuntary full rematerialization." }],
    };
    const { rows } = collectiveRows(event);
    expect(rows[0]!.origin).toEqual({
      from: [{ label: "argument a", sharding: "P('x', None)", line: 2, axes: "x" }],
      to: [{ label: "with_sharding_constraint", sharding: "P(None, 'x')", line: 4, axes: "x" }],
      written: false,
    });
    expect(originText(rows[0]!.origin!.from)).toBe("argument a P('x', None) (line 2)");
    expect(originText([])).toBe("—");
    expect(rows[1]!.origin).toBeNull();
    expect(rematerializationRows(event)).toEqual([{ line: 3, opName: "jit(f)/sharding_constraint", from: "{devices=[1,2]0,1}", to: "{devices=[2,1]0,1}", message: "[SPMD] Involuntary full rematerialization." }]);
    expect(rematerializationRows(EVENT)).toEqual([]);
  });

  it("lists the collectives with bytes, groups and the line, and what one without a line is", () => {
    const { rows, total } = collectiveRows(EVENT);
    expect(rows[0]).toMatchObject({ kind: "all-reduce", bytes: "32 B", groups: "{0,1} {2,3}", line: 2, why: "" });
    expect(rows[1]).toMatchObject({ bytes: "2.0 KiB", groups: "replica_groups=odd", line: null });
    expect(rows[1]!.why).toContain("partitioner");
    expect(total).toBe("2.0 KiB");
  });
});

describe("the sharding examples as requests", () => {
  it("send the mesh, the PartitionSpecs and ask for the sharding output", async () => {
    const { EXAMPLES } = await import("../src/model/examples");
    const { toRequest, fromRequest } = await import("../src/model/state");
    const ex = EXAMPLES.find((e) => e.id === "sharding-2d-layer")!;
    const problems: unknown[] = [];
    const req = toRequest({ ...ex.state, backend: "cpu" }, problems as never);
    expect(problems).toEqual([]);
    expect(req).toMatchObject({
      devices: 4,
      mesh: { shape: [2, 2], axis_names: ["x", "y"], axis_types: ["auto", "auto"] },
      in_shardings: [["x", "y"], ["y", null]],
      out_shardings: [["x", null]],
    });
    expect(req.outputs).toContain("sharding");
    expect(req.outputs).toContain("hlo");
    // a stored link comes back with the same mesh and specs
    expect(toRequest(fromRequest(req, { ...ex.state, backend: "cpu" }))).toEqual(req);
    const psum = toRequest({ ...EXAMPLES.find((e) => e.id === "sharding-shard-map-psum")!.state, backend: "cpu" });
    expect(psum.transforms).toEqual([{ name: "shard_map", in_specs: [["i"]], out_specs: [["i"]] }, { name: "jit" }]);
  });

  it("sends no mesh and no sharding output for the other examples", async () => {
    const { EXAMPLES } = await import("../src/model/examples");
    const { toRequest } = await import("../src/model/state");
    const req = toRequest({ ...EXAMPLES[0]!.state, backend: "cpu" });
    expect(req).not.toHaveProperty("mesh");
    expect(req.outputs ?? []).not.toContain("sharding");
  });

  it("says which sharding field does not parse", async () => {
    const { toRequest } = await import("../src/model/state");
    const { DEFAULT_STATE } = await import("../src/model/examples");
    const problems: { step: number; option: string }[] = [];
    toRequest({ ...DEFAULT_STATE, sharding: { mesh: { shape: "2", names: "x", types: [] }, inShardings: ["y"], outShardings: "" } }, problems as never);
    expect(problems).toMatchObject([{ step: -1, option: "sharding: in_shardings[0]" }]);
  });
});

describe("the pane's names", () => {
  it("calls arguments by the entry's parameter names", async () => {
    const { argumentName } = await import("../src/panes/sharding");
    expect(argumentName("[1]", ["x", "w"])).toBe("w");
    expect(argumentName("[0]['b']", ["params"])).toBe("params['b']");
    expect(argumentName("[2]", ["x"])).toBe("argument [2]");
  });
});
