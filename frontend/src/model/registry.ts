// The page's table of outputs: for each output a request may name (the same names
// as sandbox/protocol.py's OUTPUT_TABLE; tests/protocol/test_outputs_registry.py checks
// both name the same), the tab that shows it and whether the page asks for it only
// when its toggle is on (outputs that cost a dump of XLA's compile).
import { Output } from "../generated/request";
import { TABS, type TabId } from "./tabtable";
import { parsedOrNull } from "../util/narrow";
import { hasTarget, outputRefusal, type Targets } from "./targets";

export interface OutputEntry {
  /** the tab whose pane shows this output */
  tab: TabId;
  /** asked for only when its toggle under "What to compute" is on: what it is, and what
   * it costs (measured: docs/frontend.md#what-to-compute says where each figure is from) */
  optIn?: { help: string; cost: string };
  /** made when a request field asks for it (the server adds it), never asked for by name */
  byField?: string;
}

/** What an output that reads XLA's dump costs: the compile writes its dump (measured:
 * as fast as a plain compile for a small jit(grad), shared/notes/measured-facts.md). */
const DUMP_COST = "a dump of XLA's compile: about a plain compile's time";

// Keyed by the server's Output enum: an output added to sandbox/protocol.py fails the
// type check here until the page says where it shows it.
export const OUTPUT_PANES: Record<Output, OutputEntry> = {
  jaxpr: { tab: "jaxpr" },
  stablehlo: { tab: "stablehlo" },
  hlo: { tab: "hlo" },
  value: { tab: "value" },
  cost: { tab: "cost" },
  timing: { tab: "timing" },
  passes: { tab: "passes", optIn: { help: "every HLO pass that changed the module, with a before/after diff", cost: DUMP_COST } },
  asm: { tab: "asm", optIn: { help: "each compiled kernel's assembly (CPU), or its PTX when compiling for a GPU target", cost: DUMP_COST } },
  memory: { tab: "memory", optIn: { help: "the buffers XLA assigned and the peak", cost: DUMP_COST } },
  remarks: { tab: "remarks", optIn: { help: "why JAX traced or compiled again (cache misses), warnings, saved residuals", cost: DUMP_COST } },
  // asked for with every run over a mesh (model/state.ts), or by its toggle
  sharding: { tab: "sharding", optIn: { help: "which device holds which block, and the collectives XLA inserted", cost: "read from the compile: no extra run" } },
  autodiff: { tab: "autodiff", optIn: { help: "how JAX differentiates: the JVP, linear and transposed jaxprs, the residuals saved", cost: "×1.04 the run (median of 61 programs)" } },
  // no pane of its own: the editor shows each expression's shape (editor/editor-shapes.ts)
  shapes: { tab: "jaxpr" },
  kernels: { tab: "kernels", optIn: { help: "each Pallas kernel: its grid map, jaxpr, Mosaic-TPU module and Triton IR (no TPU or GPU needed)", cost: "lowers each pallas_call for TPU and GPU: runs of 15–23 s seen on a loaded machine" } },
  profile: { tab: "profile", optIn: { help: "the compiled calls run again under JAX's profiler: time per HLO instruction, a roofline, the trace", cost: "re-runs the program (50 ms or more, up to 10 calls); +0.3–0.9 s a worker's first, for its peaks" } },
  // asked for by the checks box (controls/checks-box.ts): the request's `checks` makes it
  checks: { tab: "checks", byField: "checks" },
  recompiles: { tab: "recompiles", optIn: { help: "why JAX traced and compiled again: each call site's hits, misses, JAX's explanations and their milliseconds", cost: "×1.26 the run (median of 10 programs; one more call of the entry)" } },
  export: { tab: "export", optIn: { help: "jax.export of the pipeline: avals, platforms, StableHLO, the artifact and its round trip", cost: "×5.9 the run (median of 10 programs): the round trip's fresh process imports JAX, 3–4 s on a loaded machine" } },
  numerics: { tab: "numerics", optIn: { help: "every equation against a float64 shadow: its error and the error born there, at its line, with hints; jit against op by op, and precision settings side by side", cost: "adds ×1.6 the run (median of 17 page examples; ×0.3–3.6, busy machine): each equation is bound three times" } },
  trace_values: { tab: "trace_values", optIn: { help: "every equation stepped on the arguments: its outputs' min, max, mean, NaN and Inf counts, and the first NaN or Inf at its line", cost: "×1.21 the run (median of 61 programs; ×1.85 at worst)" } },
};

/** The outputs a page's request names: the server's defaults plus the opted-in ones,
 * less those a compile for absent hardware cannot give (model/targets.ts). */
export function requestOutputs(optedIn: readonly Output[], targets: Targets = {}): Output[] | undefined {
  const extra = optedIn.filter((name) => OUTPUT_PANES[name].optIn);
  if (extra.length === 0 && !hasTarget(targets)) return undefined; // the server's default outputs
  const defaults = Output.options.filter((name) => !OUTPUT_PANES[name].optIn && !OUTPUT_PANES[name].byField);
  return [...defaults, ...extra].filter((name) => outputRefusal(name, targets) === null);
}

/** `name` if it is an output the page asks for only when ticked, else null. */
export function optInOutput(name: unknown): Output | null {
  const output = parsedOrNull(Output, name);
  return output !== null && OUTPUT_PANES[output].optIn ? output : null;
}

/** The name the page gives `name`: its tab's title (Stepper for trace_values). */
export function outputTitle(name: Output): string {
  const tab = OUTPUT_PANES[name].tab;
  return TABS.find((t) => t.id === tab)!.title;
}
