// "Across versions": one request run on several JAX versions by the server
// (`POST /api/v1/across`, docs/api.md "Across versions"), and what the page makes of
// its answer: per output where it first changed, the diff at that step, and the
// stage and timing figures side by side. Pure: the view is panes/across.ts.
import * as z from "zod/mini";
import { fmtMs } from "../util/format";
import type { RunBody } from "../generated/request";

/** The server's bounds on `versions` (backend/app/routes/across.py, MAX_ACROSS). */
export const MIN_ACROSS = 2;
export const MAX_ACROSS = 9;

const num = z.nullish(z.number());

export const AcrossAnswer = z.looseObject({
  versions: z.array(
    z.looseObject({
      version: z.string(),
      status: z.string(),
      reason: z.nullish(z.string()),
      jax_version: z.nullish(z.string()),
      errors: z.nullish(z.record(z.string(), z.string())),
    }),
  ),
  outputs: z.array(
    z.looseObject({
      output: z.string(),
      pipeline: z.string(),
      first_changed: z.nullable(z.string()),
      missing: z.array(z.string()),
      changes: z.array(z.looseObject({ from: z.string(), to: z.string(), diff: z.string() })),
    }),
  ),
  times: z.array(
    z.looseObject({
      version: z.string(),
      trace_ms: num,
      lower_ms: num,
      compile_ms: num,
      execute_ms: num,
      median_ms: z.nullish(z.record(z.string(), z.number())),
    }),
  ),
});
export type AcrossAnswerT = z.infer<typeof AcrossAnswer>;
export type OutputChange = AcrossAnswerT["outputs"][number];

export interface VersionChoice {
  version: string;
  installed: boolean;
  default: boolean;
}

/** The versions the across picker offers (installed ones, oldest first, as the server
 * lists them) and those ticked at first: the ones kept from before that are still
 * offered, else the newest two. */
export function acrossChoices(versions: VersionChoice[], kept: readonly string[] | undefined): { offered: string[]; ticked: string[] } {
  const offered = versions.filter((v) => v.installed).map((v) => v.version);
  const still = (kept ?? []).filter((v) => offered.includes(v));
  return { offered, ticked: still.length > 0 ? still : offered.slice(-2) };
}

/** The body of `POST /api/v1/across` for `request` on `versions`, or what is wrong
 * with the choice. The versions are named in `versions`, so the request has none. */
export function acrossBody(request: RunBody, versions: readonly string[]): { body: { request: RunBody; versions: string[] } } | { problem: string } {
  const distinct = [...new Set(versions)];
  if (distinct.length < MIN_ACROSS) return { problem: `Tick at least ${MIN_ACROSS} versions to compare (${distinct.length} ticked).` };
  if (distinct.length > MAX_ACROSS) return { problem: `At most ${MAX_ACROSS} versions in one comparison (${distinct.length} ticked).` };
  // a library's alternative versions are one JAX version's: each version runs its own set
  const { jax_version: _unused, libraries: _theirs, ...rest } = request;
  return { body: { request: rest, versions: distinct } };
}

const TITLES: Record<string, string> = { jaxpr: "jaxpr", stablehlo: "StableHLO", hlo: "HLO", value: "Value", cost: "Cost" };

/** `jaxpr`, or `jaxpr (B)` for compare mode's pipeline B ("0"). */
export function outputTitle(output: string, pipeline: string): string {
  const title = TITLES[output] ?? output;
  return pipeline === "main" ? title : `${title} (${pipeline === "0" ? "B" : `pipeline ${pipeline}`})`;
}

/** One line per output: where it first changed, in words. */
export function verdict(o: OutputChange): string {
  const missing = o.missing.length > 0 ? `; not produced by ${o.missing.join(", ")}` : "";
  if (o.first_changed === null) return `the same on every version${missing}`;
  const first = o.changes.find((c) => c.to === o.first_changed);
  const from = first ? ` (from ${first.from})` : "";
  const more = o.changes.length > 1 ? `, and ${o.changes.length - 1} later change${o.changes.length > 2 ? "s" : ""}` : "";
  return `first changed in ${o.first_changed}${from}${more}${missing}`;
}

export type DiffLineKind = "head" | "hunk" | "add" | "del" | "same";

/** How a line of a unified diff is shown. */
export function diffLineKind(line: string): DiffLineKind {
  if (line.startsWith("+++ ") || line.startsWith("--- ")) return "head";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "same";
}

/** A figure that moved this much from the version before is marked. */
export const NOTABLE_RATIO = 1.5;

export interface TimesCell {
  text: string;
  /** against the same figure of the version before it */
  trend: "slower" | "faster" | null;
}

export interface TimesTable {
  columns: string[];
  rows: { version: string; cells: TimesCell[] }[];
}

const STAGES = [
  ["trace_ms", "trace"],
  ["lower_ms", "lower"],
  ["compile_ms", "compile"],
  ["execute_ms", "execute"],
] as const;

/** The times table: one row per version (oldest first), the stage times, then each
 * timing row's median per call; a figure ≥ 1.5× (or ≤ 1/1.5×) the version before's is
 * marked slower (faster). */
export function timesTable(times: AcrossAnswerT["times"]): TimesTable {
  const labels: string[] = [];
  for (const t of times) for (const label of Object.keys(t.median_ms ?? {})) if (!labels.includes(label)) labels.push(label);
  const columns = [...STAGES.map(([, name]) => name), ...labels.map((l) => `${l} per call`)];
  const figures = times.map((t) => [...STAGES.map(([key]) => t[key] ?? null), ...labels.map((l) => t.median_ms?.[l] ?? null)]);
  const rows = times.map((t, i) => ({
    version: t.version,
    cells: figures[i]!.map((ms, j): TimesCell => {
      const before = i > 0 ? figures[i - 1]![j] : null;
      let trend: TimesCell["trend"] = null;
      if (ms !== null && before != null && before > 0 && ms > 0) {
        if (ms / before >= NOTABLE_RATIO) trend = "slower";
        else if (before / ms >= NOTABLE_RATIO) trend = "faster";
      }
      return { text: fmtMs(ms), trend };
    }),
  }));
  return { columns, rows };
}
