// The examples menu (what JAX users learn first) and the pipeline presets.
//
// One source of examples: the .py files in examples/ (the CLI runs the same files,
// `jaxplay run examples/X.py`) and examples/menu.json, which says which of them the
// menu lists, in what order, and how the page sets each up. Vite reads both at build
// time; a file the menu names that is missing, or metadata of the wrong shape, fails
// the build (and the unit tests) with the entry's id.
// zod/mini, as the rest of the page: the full zod would double the schemas in the entry
import * as z from "zod/mini";
import menu from "../../../examples/menu.json";
import { Output, TransformName } from "../generated/request";
import type { PlayState } from "./state";
import type { Step } from "./transforms";

const step = (name: TransformName, options: Record<string, string | boolean> = {}): Step => ({ name, options });

export interface Example {
  id: string;
  title: string;
  /** the file in examples/ the code comes from */
  file: string;
  state: Omit<PlayState, "backend">;
}

// a step's name is the server's TransformName (a misspelt one fails the build, naming it)
const StepJson = z.strictObject({ name: TransformName, options: z.optional(z.record(z.string(), z.union([z.string(), z.boolean()]))) });
const MenuEntry = z.strictObject({
  id: z.string().check(z.regex(/^[a-z0-9-]+$/)),
  title: z.string(),
  file: z.string().check(z.regex(/^[a-z0-9_]+\.py$/)),
  entry: z._default(z.string(), "f"),
  args: z.string(),
  steps: z.array(StepJson),
  compare: z._default(z.nullable(z.array(StepJson)), null),
  devices: z._default(z.int().check(z.positive()), 1),
  pallasInterpret: z._default(z.enum(["auto", "tpu_races"]), "auto"),
  config: z._default(z.record(z.string(), z.union([z.string(), z.boolean()])), {}),
  /** outputs ticked besides the defaults (profile, passes...) */
  outputs: z.optional(z.array(Output)),
  /** the export output's fields as typed (model/export_fields.ts) */
  exportShapes: z.optional(z.string()),
  exportPlatforms: z.optional(z.string()),
  sharding: z.optional(
    z.strictObject({
      mesh: z.strictObject({ shape: z.string(), names: z.string(), types: z.array(z.enum(["auto", "explicit", "manual"])) }),
      inShardings: z.array(z.string()),
      outShardings: z.string(),
    }),
  ),
});
const Menu = z.object({ examples: z.array(MenuEntry).check(z.minLength(1)) });

/** examples/*.py by file name, as text (Vite inlines them). */
export const EXAMPLE_FILES: Record<string, string> = Object.fromEntries(
  Object.entries(import.meta.glob<string>("../../../examples/*.py", { query: "?raw", import: "default", eager: true })).map(([path, text]) => [
    path.slice(path.lastIndexOf("/") + 1),
    text,
  ]),
);

/** One problem of the menu's JSON, and where (zod/mini carries no messages of its own). */
function describeIssue(issue: z.core.$ZodIssue): string {
  const at = issue.path.map((k, i) => (typeof k === "number" ? `[${k}]` : `${i === 0 ? "" : "."}${String(k)}`)).join("");
  const what =
    issue.code === "unrecognized_keys"
      ? `unknown key${issue.keys.length === 1 ? "" : "s"}: ${issue.keys.join(", ")}`
      : issue.code === "invalid_value"
        ? `expected one of ${issue.values.map((v) => JSON.stringify(v)).join("|")}`
        : issue.code === "invalid_type"
          ? `expected ${issue.expected}`
          : issue.code;
  return `✖ ${what}\n  → at ${at}`;
}

/** The menu: examples/menu.json with each entry's file read in. */
export function buildExamples(json: unknown, files: Record<string, string>): Example[] {
  const parsed = Menu.safeParse(json);
  if (!parsed.success) throw new Error(`examples/menu.json: ${parsed.error.issues.map(describeIssue).join("\n")}`);
  const seen = new Set<string>();
  return parsed.data.examples.map((e) => {
    if (seen.has(e.id)) throw new Error(`examples/menu.json: the id ${e.id} is used twice`);
    seen.add(e.id);
    const code = files[e.file];
    if (code === undefined) throw new Error(`examples/menu.json: ${e.id} names examples/${e.file}, which does not exist`);
    const toSteps = (steps: z.infer<typeof StepJson>[]): Step[] => steps.map((s) => step(s.name, s.options));
    const state: Omit<PlayState, "backend"> = {
      code,
      entry: e.entry,
      args: e.args,
      steps: toSteps(e.steps),
      compare: e.compare ? toSteps(e.compare) : null,
      devices: e.devices,
      config: e.config,
      pallasInterpret: e.pallasInterpret,
    };
    if (e.sharding) state.sharding = e.sharding;
    if (e.outputs) state.outputs = e.outputs;
    if (e.exportShapes !== undefined) state.exportShapes = e.exportShapes;
    if (e.exportPlatforms !== undefined) state.exportPlatforms = e.exportPlatforms;
    return { id: e.id, title: e.title, file: e.file, state };
  });
}

export const EXAMPLES: Example[] = buildExamples(menu, EXAMPLE_FILES);

/** Pipeline presets: they set the pipeline for the code in the editor. The two that
 * only make sense for code of a certain shape (a per-example loss, a function with
 * a collective) load their example instead, code included (Ctrl+Z in the editor
 * brings the code back). */
export interface Preset {
  id: string;
  title: string;
  steps: Step[];
  compare: Step[] | null;
  /** load this example instead of changing the pipeline alone */
  example?: string;
}

export const PRESETS: Preset[] = [
  {
    id: "per-example",
    title: "per-example gradients: vmap(grad(f)) (loads its example)",
    steps: [],
    compare: null,
    example: "per-example",
  },
  { id: "hessian", title: "Hessian: jit(hessian(f))", steps: [step("hessian"), step("jit")], compare: null },
  {
    id: "jacfwd-jacrev",
    title: "jacfwd vs jacrev (compare mode)",
    steps: [step("jacfwd"), step("jit")],
    compare: [step("jacrev"), step("jit")],
  },
  {
    id: "checkpoint",
    title: "checkpointed gradient: jit(grad(checkpoint(f)))",
    steps: [step("checkpoint", { policy: "dots_saveable" }), step("grad"), step("jit")],
    compare: [step("grad"), step("jit")],
  },
  {
    id: "pmap4",
    title: "pmap on 4 virtual devices (loads its example)",
    steps: [],
    compare: null,
    example: "pmap",
  },
  { id: "grad-jit", title: "gradient: jit(grad(f))", steps: [step("grad"), step("jit")], compare: null },
  { id: "none", title: "f as written (no transforms)", steps: [], compare: null },
];

export const DEFAULT_STATE: PlayState = { ...EXAMPLES[0]!.state, backend: "auto" };
