// Compiling for hardware the server does not have (docs/api.md, "Deviceless GPU
// compiles", "Deviceless TPU compiles"): a `gpu_target` or a `tpu_topology` the
// operator offers (GET /api/v1/backends). Which outputs such a run gives is the
// server's rule (generated/request.ts): the page asks for none it would refuse, and
// says why; what else the request must be is said before it is sent.
import { NOT_FOR_GPU_TARGET, TOPOLOGY_OUTPUTS, type Backend, type Output } from "../generated/request";

export interface Targets {
  /** `gpu_target` (`h100`); empty or absent: none */
  gpuTarget?: string;
  /** `tpu_topology` (`v5e:2x2`); empty or absent: none */
  tpuTopology?: string;
}

export function hasTarget(t: Targets): boolean {
  return Boolean(t.gpuTarget || t.tpuTopology);
}

/** Why the run does not ask for `output` with these targets, or null when it does. */
export function outputRefusal(output: Output, t: Targets): string | null {
  if (t.gpuTarget && NOT_FOR_GPU_TARGET.includes(output)) {
    return `compiling for ${t.gpuTarget} without its GPU: nothing runs, so no ${output}`;
  }
  if (t.tpuTopology && !TOPOLOGY_OUTPUTS.includes(output)) {
    return `compiling for TPU ${t.tpuTopology} gives ${TOPOLOGY_OUTPUTS.join(", ")} only: no ${output}`;
  }
  return null;
}

/** What the request must change to go with its targets (the server's rules in
 * sandbox/protocol/gpu_target_request.py and sandbox/protocol/sharding_request.py), in words. */
export function targetProblems(t: Targets, backend: Backend, hasMesh: boolean): string[] {
  const problems: string[] = [];
  if (t.gpuTarget && t.tpuTopology) problems.push(`pick one: GPU ${t.gpuTarget} or TPU ${t.tpuTopology}`);
  if (t.gpuTarget && backend !== "cpu" && backend !== "auto") {
    problems.push(`compiling for ${t.gpuTarget} is done on a CPU worker: pick backend auto or cpu`);
  }
  if (t.gpuTarget && hasMesh) problems.push(`compiling for ${t.gpuTarget} is for one GPU: untick "a device mesh" (sharding)`);
  if (t.tpuTopology && !hasMesh) {
    problems.push(`compiling for TPU ${t.tpuTopology} needs a device mesh over its devices: tick "a device mesh" (sharding)`);
  }
  return problems;
}

/** The devices a topology name gives (`v5e:2x2` → 4): the product of its sizes. */
export function topologyDevices(name: string): number | null {
  const m = /[:=_-]([0-9]+(?:x[0-9]+)*)$/.exec(name);
  return m ? m[1]!.split("x").reduce((n, d) => n * Number(d), 1) : null;
}

/** The mesh a topology suggests: its sizes, with axis names x, y, z. */
export function topologyMesh(name: string): { shape: string; names: string } | null {
  const m = /[:=_-]([0-9]+(?:x[0-9]+)*)$/.exec(name);
  if (!m) return null;
  const sizes = m[1]!.split("x").filter((d) => d !== "1");
  if (sizes.length === 0) return { shape: "1", names: "x" };
  return { shape: sizes.join(", "), names: ["x", "y", "z"].slice(0, sizes.length).join(", ") };
}
