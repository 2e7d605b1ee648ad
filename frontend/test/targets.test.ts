import { describe, expect, it } from "vitest";
import { DEFAULT_STATE } from "../src/model/examples";
import { NOT_FOR_GPU_TARGET, RunRequest, TOPOLOGY_OUTPUTS } from "../src/generated/request";
import { requestOutputs } from "../src/model/registry";
import { fromRequest, toRequest, type PlayState } from "../src/model/state";
import { outputRefusal, targetProblems, topologyDevices, topologyMesh } from "../src/model/targets";
import type { StepProblem } from "../src/model/transforms";

// Compiling for a GPU or TPU the server does not have: the page asks only for the
// outputs the server's rules (generated from sandbox/) allow, and says why not the rest.
describe("compile targets", () => {
  it("a GPU target drops value and timing (nothing runs) and keeps the rest, opt-ins included", () => {
    const outputs = requestOutputs(["asm", "memory"], { gpuTarget: "h100" });
    expect(outputs).toEqual(["jaxpr", "stablehlo", "hlo", "cost", "shapes", "asm", "memory"]);
    expect(NOT_FOR_GPU_TARGET.every((o) => outputRefusal(o, { gpuTarget: "h100" })?.includes("nothing runs"))).toBe(true);
    expect(outputRefusal("asm", { gpuTarget: "h100" })).toBeNull();
  });

  it("a TPU topology keeps only the outputs the server lists for it", () => {
    const outputs = requestOutputs(["passes", "asm", "memory", "sharding"], { tpuTopology: "v5e:2x2" });
    expect(outputs).toEqual(["jaxpr", "stablehlo", "hlo", "cost", "shapes", "memory", "sharding"]);
    expect(outputs!.every((o) => TOPOLOGY_OUTPUTS.includes(o))).toBe(true);
    expect(outputRefusal("passes", { tpuTopology: "v5e:2x2" })).toMatch(/TPU v5e:2x2 gives .* only: no passes/);
  });

  it("without a target the server's defaults stand (no outputs sent)", () => {
    expect(requestOutputs([], {})).toBeUndefined();
    expect(requestOutputs([], { gpuTarget: "" })).toBeUndefined();
  });

  it("a GPU target's request passes the server's schema and round-trips through a snippet", () => {
    const state: PlayState = { ...DEFAULT_STATE, gpuTarget: "h100", outputs: ["asm"] };
    const problems: StepProblem[] = [];
    const request = toRequest(state, problems);
    expect(problems).toEqual([]);
    expect(request.gpu_target).toBe("h100");
    expect(request.outputs).not.toContain("value");
    expect(RunRequest.safeParse(request).success).toBe(true);
    expect(fromRequest(request, DEFAULT_STATE).gpuTarget).toBe("h100");
  });

  it("a TPU topology needs a mesh, a GPU target none, and not a GPU backend: said before sending", () => {
    const problems: StepProblem[] = [];
    toRequest({ ...DEFAULT_STATE, tpuTopology: "v5e:2x2" }, problems);
    expect(problems.map((p) => p.message)).toEqual([expect.stringContaining("needs a device mesh")]);
    expect(targetProblems({ gpuTarget: "h100" }, "gpu", true)).toEqual([
      expect.stringContaining("pick backend auto or cpu"),
      expect.stringContaining("is for one GPU"),
    ]);
    const meshed: PlayState = { ...DEFAULT_STATE, tpuTopology: "v5e:2x2", sharding: { mesh: { shape: "2, 2", names: "x, y", types: ["auto", "auto"] }, inShardings: [], outShardings: "" } };
    const fine: StepProblem[] = [];
    const request = toRequest(meshed, fine);
    expect(fine).toEqual([]);
    expect(request.tpu_topology).toBe("v5e:2x2");
    expect(RunRequest.safeParse(request).success).toBe(true);
    expect(fromRequest(request, DEFAULT_STATE).tpuTopology).toBe("v5e:2x2");
  });

  it("reads a topology's devices and proposes its mesh", () => {
    expect(topologyDevices("v5e:2x2")).toBe(4);
    expect(topologyDevices("v5p:2x2x1")).toBe(4);
    expect(topologyMesh("v5e:4x4")).toEqual({ shape: "4, 4", names: "x, y" });
    expect(topologyMesh("v5p:2x2x1")).toEqual({ shape: "2, 2", names: "x, y" });
    expect(topologyDevices("nonsense")).toBeNull();
  });
});
