// pmap, the legacy step, and its shard_map form: the pipeline's pmap step rewritten
// as shard_map over a 1-D mesh, then jit (the builder's "as shard_map" action).
import { IDENT, splitTopLevel, type MeshState } from "./sharding-studio";
import type { Step } from "./transforms";

/** pmap's shard_map form (JAX's migration guide): a 1-D mesh of `devices` over the
 * pmap's axis name, each argument split along its mapped axis, then jit. `pmap`
 * hands f one slice (the mapped axis gone); shard_map hands it a block with the
 * axis kept (size 1 per device when the axis has one element per device). */
export function pmapAsShardMap(step: Step, nargs: number, devices: number): { steps: Step[]; mesh: MeshState; note: string } {
  const axis = typeof step.options.axis_name === "string" && IDENT.test(step.options.axis_name.trim()) ? step.options.axis_name.trim() : "i";
  const inAxes = typeof step.options.in_axes === "string" && step.options.in_axes.trim() ? step.options.in_axes.trim() : "0";
  const perArg = splitTopLevel(inAxes.replace(/^\((.*)\)$/s, "$1"));
  const specFor = (a: string | undefined): string => {
    const n = a === undefined ? 0 : a.trim() === "None" ? null : Number(a.trim());
    if (n === null || Number.isNaN(n)) return "P()";
    return `P(${[...Array(n).fill("None"), `'${axis}'`].join(", ")})`;
  };
  const specs = Array.from({ length: Math.max(nargs, 1) }, (_, i) => specFor(perArg.length > 1 ? perArg[i] : perArg[0]));
  const outSpec = `P('${axis}')`;
  return {
    steps: [{ name: "shard_map", options: { in_specs: specs.join(", "), out_specs: outSpec } }, { name: "jit", options: {} }],
    mesh: { shape: String(devices), names: axis, types: ["auto"] },
    note: `shard_map keeps the mapped axis: f sees blocks of ${devices > 0 ? `1/${devices}` : "a share"} of it, not slices`,
  };
}
