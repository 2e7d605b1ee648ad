// What the page edits, how it becomes a run request (SPEC §1), and how it is saved
// locally and restored from a shared snippet. Pure apart from localStorage access.
import * as z from "zod/mini";
import { checksFromRequest, checksFromSaved, checksRequest, type ChecksState } from "./check-choices";
import { exportFromRequest, exportRequest, type ExportState } from "./export_fields";
import { Backend, RunRequest, TransformName, type Output } from "../generated/request";
import { parsedItems, parsedOrNull } from "../util/narrow";
import { optInOutput, requestOutputs } from "./registry";
import { flagsText, parseFlags } from "./xla";
import { targetProblems, type Targets } from "./targets";
import { AXIS_TYPES, shardingFromRequest, shardingRequest, type ShardingProblem, type ShardingState } from "./sharding-studio";
import { fromRequestTransforms, toRequestTransforms, type Step, type StepProblem } from "./transforms";

export interface PlayState extends ExportState {
  code: string;
  entry: string;
  args: string;
  steps: Step[];
  /** the second pipeline of compare mode; null when compare mode is off */
  compare: Step[] | null;
  backend: Backend;
  devices: number;
  /** the JAX version runs name (`jax_version`); empty or absent: the server's default */
  jaxVersion?: string;
  /** other versions of that JAX version's libraries runs pick (`libraries`: name ->
   * version, the libraries popover's); absent or empty: its defaults */
  libraries?: Record<string, string>;
  config: Record<string, boolean | string>;
  /** outputs asked for besides the server's defaults (passes, asm, memory, remarks) */
  outputs?: Output[];
  /** XLA flags as typed (`name=value ...`): compiler_options of A, and of B in compare mode */
  flags?: string;
  compareFlags?: string;
  /** the args were typed by hand: they no longer follow the entry's signature */
  argsByHand?: boolean;
  /** the mesh and PartitionSpecs as typed (model/sharding-studio.ts); absent or no mesh: none sent */
  sharding?: ShardingState;
  /** the versions ticked in across-versions mode (kept locally, never in a snippet) */
  acrossVersions?: string[];
  /** compile for a GPU the server does not have (`gpu_target`; model/targets.ts); empty: none */
  gpuTarget?: string;
  /** compile for a TPU topology the server does not have (`tpu_topology`); empty: none */
  tpuTopology?: string;
  /** the one-click checks ticked (model/check-choices.ts); absent or none: no checks asked */
  checks?: ChecksState;
  /** how a pallas_call without interpret= runs on a CPU run (`pallas_interpret`); absent: auto */
  pallasInterpret?: "auto" | "tpu_races";
  /** the runs' wall-clock limit (`timeout_s`) once a run out of time was run again with
   * more ("Run again with up to N s"): kept, and in a link made from the page, so the
   * link's program runs with the limit it was shared with; absent: the server's default */
  timeoutS?: number;
  /** the cost pane's figures before optimisation asked for (`cost_before`): they cost a
   * second conversion of the module to HLO, so only when asked */
  costBefore?: boolean;
  /** the numerics output's precision settings, for the one run the Numerics pane's
   * button starts (not kept: the next run is the plain lens again) */
  numericsPrecision?: RunRequest["numerics_precision"];
  /** the value's first leaf described (`value_from`), for the one run the Value pane's
   * page buttons start (not kept, nor in a link: the next run shows the first page) */
  valueFrom?: number;
}

/** The server's default `timeout_s` (sandbox/protocol/requests.py RunRequest): a limit
 * no longer than it is not kept in the state or sent. */
export const DEFAULT_TIMEOUT_S = 20;

export const CONFIG_TOGGLES: { name: string; label: string; help: string }[] = [
  { name: "jax_enable_x64", label: "x64", help: "64-bit floats and ints (jax_enable_x64)" },
  { name: "jax_debug_nans", label: "debug NaNs", help: "raise at the first NaN (jax_debug_nans)" },
  { name: "jax_disable_jit", label: "disable jit", help: "run jit-decorated code eagerly (jax_disable_jit)" },
];

/** The run request for `state`, typed by the server's RunRequest (generated from
 * sandbox/protocol.py); what does not parse is listed in `problems`. */
export function toRequest(state: PlayState, problems: StepProblem[] = []): RunRequest {
  const compareProblems: StepProblem[] = [];
  const request: RunRequest = {
    code: state.code,
    entry: state.entry.trim() || "f",
    args: state.args.trim() || "()",
    transforms: toRequestTransforms(state.steps, problems),
    compare: state.compare ? [toRequestTransforms(state.compare, compareProblems)] : [],
    backend: state.backend,
    devices: state.devices,
    config: { ...state.config },
  };
  // omitted for the default, so a link made on it opens on whatever is the default then
  if (state.jaxVersion) request.jax_version = state.jaxVersion;
  if (state.libraries && Object.keys(state.libraries).length > 0) request.libraries = { ...state.libraries };
  // a run over a mesh shows its shardings: the sharding output is asked for with it
  const sharding: ShardingProblem[] = [];
  const meshFields = state.sharding ? shardingRequest(state.sharding, sharding) : {};
  Object.assign(request, meshFields);
  for (const p of sharding) problems.push({ step: -1, option: `sharding: ${p.field}`, message: p.message });
  const withMesh: Output[] = "mesh" in meshFields ? ["sharding"] : [];
  const optedIn = [...(state.outputs ?? []), ...withMesh];
  // compiling for absent hardware: only the outputs such a run gives (model/targets.ts)
  const targets: Targets = { gpuTarget: state.gpuTarget, tpuTopology: state.tpuTopology };
  if (state.gpuTarget) request.gpu_target = state.gpuTarget;
  if (state.tpuTopology) request.tpu_topology = state.tpuTopology;
  // omitted for the default, as jax_version
  if (state.pallasInterpret === "tpu_races") request.pallas_interpret = "tpu_races";
  if (state.timeoutS !== undefined && state.timeoutS > DEFAULT_TIMEOUT_S) request.timeout_s = state.timeoutS;
  if (state.costBefore) request.cost_before = true;
  if (state.valueFrom) request.value_from = state.valueFrom;
  for (const message of targetProblems(targets, state.backend, "mesh" in meshFields)) {
    problems.push({ step: -1, option: "compile for", message });
  }
  const outputs = requestOutputs(optedIn, targets);
  if (outputs) request.outputs = outputs;
  Object.assign(request, checksRequest(state.checks));
  if (state.numericsPrecision?.length && request.outputs?.includes("numerics")) request.numerics_precision = [...state.numericsPrecision];
  // the export output's shapes and platforms (model/export_fields.ts), when it is asked for
  if (request.outputs?.includes("export")) {
    const exportProblems: string[] = [];
    Object.assign(request, exportRequest(state, exportProblems));
    for (const message of exportProblems) problems.push({ step: -1, option: "export", message });
  }
  // XLA flags (model/xla.ts parses them; the server checks them against its allow-list); B's
  // replace A's for pipeline B, so the same pipeline twice compares flags A against B
  const flagsA = parseFlags(state.flags ?? "");
  for (const message of flagsA.problems) problems.push({ step: -1, option: "XLA flags A", message });
  if (Object.keys(flagsA.options).length > 0) request.compiler_options = flagsA.options;
  if (state.compare && (state.compareFlags ?? "").trim()) {
    const flagsB = parseFlags(state.compareFlags ?? "");
    for (const message of flagsB.problems) problems.push({ step: -1, option: "XLA flags B", message });
    request.compare_compiler_options = [flagsB.options];
  }
  for (const p of compareProblems) problems.push({ ...p, step: p.step, option: `B: ${p.option}` });
  return request;
}

const AnyObject = z.record(z.string(), z.unknown());

/** A stored request (a snippet, an autosave) back into page state; lenient. */
export function fromRequest(data: unknown, fallback: PlayState): PlayState {
  const d = parsedOrNull(AnyObject, data);
  if (d === null) return fallback;
  const str = (v: unknown, dflt: string): string => (typeof v === "string" ? v : dflt);
  const compare = Array.isArray(d.compare) && d.compare.length > 0 ? fromRequestTransforms(d.compare[0]) : null;
  const config: Record<string, boolean | string> = {};
  for (const [k, v] of Object.entries(parsedOrNull(AnyObject, d.config) ?? {})) {
    if (typeof v === "boolean" || typeof v === "string") config[k] = v;
  }
  const devices = parsedOrNull(RunRequest.shape.devices, d.devices) ?? 1; // the server's bounds
  return {
    code: str(d.code, fallback.code),
    entry: str(d.entry, "f"),
    args: str(d.args, "()"),
    steps: fromRequestTransforms(d.transforms),
    compare,
    backend: parsedOrNull(Backend, d.backend) ?? "auto",
    devices,
    jaxVersion: str(d.jax_version, ""),
    libraries: parsedOrNull(z.record(z.string(), z.string()), d.libraries) ?? {},
    config,
    // sharding comes with the mesh; the other opt-in outputs are the ticked boxes
    outputs: optedInOutputs(d.outputs).filter((o) => o !== "sharding"),
    sharding: shardingFromRequest(d),
    flags: flagsText(d.compiler_options),
    compareFlags: Array.isArray(d.compare_compiler_options) ? flagsText(d.compare_compiler_options[0]) : "",
    gpuTarget: parsedOrNull(RunRequest.shape.gpu_target, d.gpu_target) ?? "",
    tpuTopology: parsedOrNull(RunRequest.shape.tpu_topology, d.tpu_topology) ?? "",
    pallasInterpret: parsedOrNull(RunRequest.shape.pallas_interpret, d.pallas_interpret) ?? "auto",
    timeoutS: longerTimeout(d.timeout_s),
    costBefore: d.cost_before === true,
    checks: checksFromRequest(d),
    ...exportFromRequest(d),
  };
}

/** A stored `timeout_s` the page keeps: one longer than the default, within the
 * request's bounds (the server caps it at its own maximum); else none. */
function longerTimeout(value: unknown): number | undefined {
  const s = parsedOrNull(RunRequest.shape.timeout_s, value);
  return s != null && s > DEFAULT_TIMEOUT_S ? s : undefined;
}

/** The opt-in outputs among `values` (a stored request's, the autosave's); the rest dropped. */
function optedInOutputs(values: unknown): Output[] {
  return (Array.isArray(values) ? values : []).map(optInOutput).filter((o) => o !== null);
}

// --- local autosave ----------------------------------------------------------------

const KEY = "jaxplay:state:v1";

// The autosave is read back field by field: one saved by an older page (a transform
// since renamed, a field of another shape) loses that field, not the whole state.
const SavedStep = z.object({ name: TransformName, options: z.record(z.string(), z.union([z.string(), z.boolean()])) });
const Saved = z.looseObject({ code: z.string(), steps: z.array(z.unknown()) });
const SavedSharding = z.object({
  mesh: z.nullable(z.object({ shape: z.string(), names: z.string(), types: z.array(z.enum(AXIS_TYPES)) })),
  inShardings: z.array(z.string()),
  outShardings: z.string(),
});
const Text = z.string();

/** The autosaved state, as typed (option text included), or null. */
export function loadAutosave(fallback: PlayState): PlayState | null {
  try {
    const raw = localStorage.getItem(KEY);
    if (!raw) return null;
    const parsed = Saved.safeParse(JSON.parse(raw));
    if (!parsed.success) return null;
    const saved = parsed.data;
    return {
      ...fallback,
      code: saved.code,
      entry: parsedOrNull(Text, saved.entry) ?? fallback.entry,
      args: parsedOrNull(Text, saved.args) ?? fallback.args,
      steps: parsedItems(SavedStep, saved.steps),
      compare: Array.isArray(saved.compare) ? parsedItems(SavedStep, saved.compare) : null,
      backend: parsedOrNull(Backend, saved.backend) ?? fallback.backend,
      devices: parsedOrNull(RunRequest.shape.devices, saved.devices) ?? fallback.devices,
      jaxVersion: parsedOrNull(Text, saved.jaxVersion) ?? fallback.jaxVersion,
      libraries: parsedOrNull(z.record(z.string(), Text), saved.libraries) ?? fallback.libraries,
      config: parsedOrNull(z.record(z.string(), z.union([z.boolean(), z.string()])), saved.config) ?? {},
      outputs: Array.isArray(saved.outputs) ? optedInOutputs(saved.outputs) : fallback.outputs,
      flags: parsedOrNull(Text, saved.flags) ?? fallback.flags,
      compareFlags: parsedOrNull(Text, saved.compareFlags) ?? fallback.compareFlags,
      argsByHand: parsedOrNull(z.boolean(), saved.argsByHand) ?? fallback.argsByHand,
      sharding: parsedOrNull(SavedSharding, saved.sharding) ?? fallback.sharding,
      acrossVersions: parsedOrNull(z.array(Text), saved.acrossVersions) ?? fallback.acrossVersions,
      gpuTarget: parsedOrNull(Text, saved.gpuTarget) ?? fallback.gpuTarget,
      tpuTopology: parsedOrNull(Text, saved.tpuTopology) ?? fallback.tpuTopology,
      pallasInterpret: parsedOrNull(RunRequest.shape.pallas_interpret, saved.pallasInterpret) ?? fallback.pallasInterpret,
      timeoutS: longerTimeout(saved.timeoutS) ?? fallback.timeoutS,
      costBefore: parsedOrNull(z.boolean(), saved.costBefore) ?? fallback.costBefore,
      checks: checksFromSaved(saved.checks) ?? fallback.checks,
      exportShapes: parsedOrNull(Text, saved.exportShapes) ?? fallback.exportShapes,
      exportPlatforms: parsedOrNull(Text, saved.exportPlatforms) ?? fallback.exportPlatforms,
    };
  } catch {
    return null;
  }
}

export function saveAutosave(state: PlayState): void {
  try {
    localStorage.setItem(KEY, JSON.stringify(state));
  } catch {
    // storage full or disabled: autosave is a convenience
  }
}

/** The snippet the server embedded in the page for `/s/{id}` (backend/app/web/page.py). */
export function embeddedSnippet(doc: Document): unknown {
  const tag = doc.getElementById("jaxplay-snippet");
  if (!tag?.textContent) return null;
  try {
    return JSON.parse(tag.textContent);
  } catch {
    return null;
  }
}

export function snippetIdFromPath(path: string): string | null {
  const m = /^\/s\/([A-Za-z0-9_-]+)\/?$/.exec(path);
  return m ? m[1]! : null;
}
