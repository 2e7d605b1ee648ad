// The transforms the engine applies and their options, spelled as JAX spells them
// (sandbox/protocol.py TRANSFORM_OPTIONS). Pure: no DOM, unit-tested.

import { Transform, TransformName } from "../generated/request";
import { parsedOrNull } from "../util/narrow";
import type { Json } from "./json";
import { formatSpec, parseSpecList } from "./sharding-studio";

/** How an option is edited and turned into JSON. */
export type OptionKind =
  | "ints" //       0  or  0, 1        -> 0 or [0, 1]
  | "names" //      n  or  n, m        -> "n" or ["n", "m"]
  | "axes" //       0, None, (None, 0) -> nested arrays of int|null
  | "int" //        4
  | "bool" //       checkbox
  | "name" //       an identifier
  | "policy" //     a name from jax.checkpoint_policies
  | "expr" //       a Python expression (tangents, cotangents)
  | "specs"; //     PartitionSpecs, one per argument or output: P('x'), P()  -> [["x"], []]

export interface OptionSpec {
  name: string;
  kind: OptionKind;
  /** JAX's own default, shown as the placeholder; bools are sent only when they differ. */
  jaxDefault: string | boolean;
  help: string;
}

const argnums = (d = "0"): OptionSpec => ({ name: "argnums", kind: "ints", jaxDefault: d, help: "which positional arguments to differentiate" });
const hasAux: OptionSpec = { name: "has_aux", kind: "bool", jaxDefault: false, help: "f returns (output, aux); aux is passed through" };
const holomorphic: OptionSpec = { name: "holomorphic", kind: "bool", jaxDefault: false, help: "f is holomorphic (complex inputs and outputs)" };

// Keyed by the server's TransformName: a transform added to or dropped from
// sandbox/protocol.py fails the type check here until this table follows.
export const TRANSFORMS: Record<TransformName, { help: string; options: OptionSpec[] }> = {
  jit: {
    help: "compile with XLA",
    options: [
      { name: "static_argnums", kind: "ints", jaxDefault: "", help: "arguments treated as compile-time constants" },
      { name: "static_argnames", kind: "names", jaxDefault: "", help: "keyword arguments treated as constants" },
      { name: "donate_argnums", kind: "ints", jaxDefault: "", help: "arguments whose buffers XLA may reuse" },
    ],
  },
  grad: {
    help: "gradient of a scalar function",
    options: [argnums(), hasAux, holomorphic, { name: "allow_int", kind: "bool", jaxDefault: false, help: "allow integer inputs (float0 gradients)" }],
  },
  value_and_grad: {
    help: "(value, gradient)",
    options: [argnums(), hasAux, holomorphic, { name: "allow_int", kind: "bool", jaxDefault: false, help: "allow integer inputs" }],
  },
  vmap: {
    help: "vectorise over a batch axis",
    options: [
      { name: "in_axes", kind: "axes", jaxDefault: "0", help: "batch axis of each argument: 0, None, (None, 0), ..." },
      { name: "out_axes", kind: "axes", jaxDefault: "0", help: "batch axis of the outputs" },
      { name: "axis_name", kind: "name", jaxDefault: "", help: "name for collectives (lax.psum, ...)" },
      { name: "axis_size", kind: "int", jaxDefault: "", help: "batch size when no argument is mapped" },
    ],
  },
  pmap: {
    help: "legacy: parallel map over devices (JAX traces it to jit + shard_map; “as shard_map” rewrites it)",
    options: [
      { name: "axis_name", kind: "name", jaxDefault: "", help: "name for collectives (lax.psum, ...)" },
      { name: "in_axes", kind: "axes", jaxDefault: "0", help: "mapped axis of each argument" },
      { name: "out_axes", kind: "axes", jaxDefault: "0", help: "mapped axis of the outputs" },
      { name: "static_broadcasted_argnums", kind: "ints", jaxDefault: "", help: "arguments broadcast as constants" },
    ],
  },
  jacfwd: { help: "Jacobian, forward mode", options: [argnums(), hasAux, holomorphic] },
  jacrev: { help: "Jacobian, reverse mode", options: [argnums(), hasAux, holomorphic] },
  hessian: { help: "Hessian (jacfwd of jacrev)", options: [argnums(), hasAux] },
  checkpoint: {
    help: "rematerialise in the backward pass",
    options: [
      { name: "prevent_cse", kind: "bool", jaxDefault: true, help: "keep XLA from undoing the rematerialisation" },
      { name: "policy", kind: "policy", jaxDefault: "", help: "which intermediates may be saved" },
    ],
  },
  jvp: { help: "forward-mode: (f(x), J·t)", options: [{ name: "tangents", kind: "expr", jaxDefault: "", help: "a Python expression: tangents like args (default: ones)" }] },
  vjp: { help: "reverse-mode: (f(x), ct·J)", options: [{ name: "cotangents", kind: "expr", jaxDefault: "", help: "a Python expression: cotangents like the output (default: ones)" }] },
  shard_map: {
    help: "run f per device on its block of a mesh (needs the mesh, under “sharding”)",
    options: [
      { name: "in_specs", kind: "specs", jaxDefault: "", help: "one PartitionSpec per argument: P('x'), P()  (empty: the arguments' own)" },
      { name: "out_specs", kind: "specs", jaxDefault: "P()", help: "PartitionSpecs of the outputs (one: for all)" },
      { name: "axis_names", kind: "names", jaxDefault: "", help: "the mesh axes f is manual over (default: all)" },
      { name: "check_vma", kind: "bool", jaxDefault: true, help: "check what varies across devices" },
    ],
  },
  smap: {
    help: "shard_map over one mesh axis, spelled as vmap is",
    options: [
      { name: "in_axes", kind: "axes", jaxDefault: "", help: "axis of each argument split over the mesh axis" },
      { name: "out_axes", kind: "axes", jaxDefault: "0", help: "axis of the outputs" },
      { name: "axis_name", kind: "name", jaxDefault: "", help: "the mesh axis (required)" },
    ],
  },
  reshard: { help: "reshard f's outputs (jax.reshard)", options: [{ name: "out_specs", kind: "specs", jaxDefault: "", help: "the outputs' PartitionSpecs (one: for all)" }] },
  linearize: { help: "(f(x), f_jvp(t)): jax.linearize", options: [{ name: "tangents", kind: "expr", jaxDefault: "", help: "a Python expression: tangents like args (required)" }] },
  linear_transpose: { help: "the transpose of a linear f at a cotangent", options: [{ name: "cotangents", kind: "expr", jaxDefault: "", help: "a Python expression: a cotangent like the output (required)" }] },
  checkify: {
    help: "functional checks: returns (error, out)",
    options: [{ name: "errors", kind: "names", jaxDefault: "user_checks", help: "user_checks, nan_checks, index_checks, div_checks, float_checks, all_checks" }],
  },
};

/** The transforms menu, in the server's order. */
export const TRANSFORM_NAMES: readonly TransformName[] = TransformName.options;

/** `name` if it is a transform the server knows (a menu's value, a stored step), else null. */
export function transformName(name: unknown): TransformName | null {
  return parsedOrNull(TransformName, name);
}

export const CHECKPOINT_POLICIES = [
  "everything_saveable",
  "nothing_saveable",
  "dots_saveable",
  "checkpoint_dots",
  "dots_with_no_batch_dims_saveable",
  "checkpoint_dots_with_no_batch_dims",
];

/** One step of a pipeline as the page keeps it: option values as the user typed them. */
export interface Step {
  name: TransformName;
  /** text for text-like options, booleans for checkboxes */
  options: Record<string, string | boolean>;
}

export class OptionError extends Error {}

// --- parsing what the user typed ---------------------------------------------------

/** Parses `0`, `None`, `(None, 0)`, `[0, (1, None)]`, `-1` into JSON (tuples as arrays). */
export function parseAxes(src: string): Json {
  const tokens = src.match(/\s*(-?\d+|None|null|[()[\],])\s*/gy);
  const joined = (tokens ?? []).join("");
  if (joined.length !== src.length) throw new OptionError("expected ints, None and (...) tuples");
  const toks = (tokens ?? []).map((t) => t.trim());
  let i = 0;
  const value = (): Json => {
    const t = toks[i++];
    if (t === undefined) throw new OptionError("unexpected end");
    if (t === "None" || t === "null") return null;
    if (/^-?\d+$/.test(t)) return Number(t);
    if (t === "(" || t === "[") {
      const close = t === "(" ? ")" : "]";
      const items: Json[] = [];
      while (toks[i] !== close) {
        if (toks[i] === undefined) throw new OptionError(`missing ${close}`);
        items.push(value());
        if (toks[i] === ",") i++;
        else if (toks[i] !== close) throw new OptionError(`expected , or ${close}`);
      }
      i++;
      return items;
    }
    throw new OptionError(`unexpected ${t}`);
  };
  if (toks.length === 0) throw new OptionError("empty");
  // A bare `None, 0` is a tuple, as in Python.
  const first = value();
  if (i === toks.length) return first;
  const items = [first];
  while (i < toks.length) {
    if (toks[i] !== ",") throw new OptionError("expected ,");
    i++;
    if (i < toks.length) items.push(value());
  }
  return items;
}

function parseInts(src: string): Json {
  const v = parseAxes(src);
  const ok = (x: Json): boolean => typeof x === "number";
  if (ok(v) || (Array.isArray(v) && v.every(ok))) return v;
  throw new OptionError("expected an int or ints: 0  or  0, 1");
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

function parseNames(src: string): Json {
  const parts = src.replace(/^[([]|[)\]]$/g, "").split(",").map((s) => s.trim().replace(/^['"]|['"]$/g, "")).filter(Boolean);
  if (parts.length === 0 || !parts.every((p) => IDENT.test(p))) throw new OptionError("expected names: n  or  n, m");
  return parts.length === 1 && !src.includes(",") ? parts[0]! : parts;
}

/** One option's JSON value, `undefined` when it is left at JAX's default. */
export function optionValue(spec: OptionSpec, raw: string | boolean | undefined): Json | undefined {
  if (spec.kind === "bool") {
    if (raw === undefined || raw === spec.jaxDefault) return undefined;
    return Boolean(raw);
  }
  const src = typeof raw === "string" ? raw.trim() : "";
  if (src === "") return undefined;
  switch (spec.kind) {
    case "ints":
      return parseInts(src);
    case "names":
      return parseNames(src);
    case "axes":
      return parseAxes(src);
    case "int": {
      if (!/^\d+$/.test(src)) throw new OptionError("expected a whole number");
      return Number(src);
    }
    case "name":
    case "policy":
      if (!IDENT.test(src)) throw new OptionError("expected a Python name");
      return src;
    case "expr":
      return src;
    case "specs":
      try {
        return parseSpecList(src);
      } catch (e) {
        throw new OptionError((e as Error).message);
      }
  }
}

export interface StepProblem {
  step: number;
  option: string;
  message: string;
}

/** One step's options as JSON (those left at JAX's default omitted); problems listed
 * under step number `index`, not thrown. */
function stepOptions(step: Step, index: number, problems: StepProblem[]): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const spec of TRANSFORMS[step.name].options) {
    try {
      const v = optionValue(spec, step.options[spec.name]);
      if (v !== undefined) out[spec.name] = v;
    } catch (e) {
      problems.push({ step: index, option: spec.name, message: (e as Error).message });
    }
  }
  return out;
}

/** The steps as the run request wants them: `{name, **options}`; problems listed, not thrown. */
export function toRequestTransforms(steps: Step[], problems: StepProblem[] = []): Transform[] {
  return steps.map((step, i) => ({ ...stepOptions(step, i, problems), name: step.name }));
}

/** The reverse: a stored request's transforms back into editable steps. */
export function fromRequestTransforms(items: unknown): Step[] {
  if (!Array.isArray(items)) return [];
  const steps: Step[] = [];
  for (const item of items) {
    const transform = parsedOrNull(Transform, item); // a name the server knows, any options
    if (transform === null) continue;
    const { name, ...rest } = transform;
    const options: Record<string, string | boolean> = {};
    for (const spec of TRANSFORMS[name].options) {
      if (!(spec.name in rest)) continue;
      const v = rest[spec.name];
      options[spec.name] = spec.kind === "bool" ? Boolean(v) : spec.kind === "specs" && Array.isArray(v) ? v.map((p) => formatSpec(p as Json[]).replace(/  \(replicated\)$/, "")).join(", ") : formatJson(v as Json);
    }
    steps.push({ name, options });
  }
  return steps;
}

/** JSON back into the Python spelling the user would type: `(None, 0)`. */
export function formatJson(v: Json): string {
  if (v === null) return "None";
  if (typeof v === "boolean") return v ? "True" : "False";
  if (Array.isArray(v)) {
    const inner = v.map(formatJson).join(", ");
    return v.length === 1 ? `(${inner},)` : `(${inner})`;
  }
  return String(v);
}

function formatOption(v: Json): string {
  if (typeof v === "string") return JSON.stringify(v).replace(/^"|"$/g, "'");
  return formatJson(v);
}

/** What the pipeline means in JAX's own words: `[grad, jit]` -> `jit(grad(f))`. */
export function describePipeline(steps: Step[], entry = "f"): string {
  let expr = entry;
  for (const step of steps) {
    const parts = [expr];
    for (const [k, v] of Object.entries(stepOptions(step, 0, []))) {
      if (k === "policy") parts.push(`policy=jax.checkpoint_policies.${String(v)}`);
      else parts.push(`${k}=${formatOption(v)}`);
    }
    expr = `${step.name}(${parts.join(", ")})`;
  }
  return expr;
}
