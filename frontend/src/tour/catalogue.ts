// The tour of JAX (issue 53), read from its one catalogue, tour/tour.json, and the
// steps' code (tour/*.py) at build time, as model/examples.ts reads examples/: the same
// file tests/engine/test_tour.py runs each step's claims from. A step's setup is a
// run request (the API's fields), loaded into the page with model/state.ts fromRequest.
// zod/mini, as the rest of the page; a catalogue of the wrong shape fails the build.
import * as z from "zod/mini";
import catalogue from "../../../tour/tour.json";
import { TABS, type TabId } from "../model/tabtable";
import { Output } from "../generated/request";

export const LANGUAGES = ["en", "zh"] as const;
export type Lang = (typeof LANGUAGES)[number];

const TabName = z.enum(TABS.map((t) => t.id) as [TabId, ...TabId[]]);
const Text = z.strictObject({ title: z.string(), body: z.array(z.string()).check(z.minLength(1)), try: z.string(), see: z.string() });
const Edit = z.strictObject({ find: z.string().check(z.minLength(1)), replace: z.string() });
// the request's fields as the API spells them; the page's fromRequest reads them
const Request = z.looseObject({ args: z.string(), transforms: z.array(z.looseObject({ name: z.string() })), outputs: z.optional(z.array(Output)) });
const Step = z.strictObject({
  id: z.string().check(z.regex(/^[a-z][a-z0-9-]{0,39}$/)),
  file: z.string().check(z.regex(/^[0-9]{2}_[a-z0-9_]+\.py$/)),
  request: Request,
  tab: TabName,
  marks: z.array(z.int().check(z.positive())),
  try: z.strictObject({ code: z.optional(z.array(Edit)), request: z.optional(z.looseObject({})), tab: z.optional(TabName) }),
  claims: z.looseObject({}),
  text: z.strictObject({ en: Text, zh: Text }),
});
const Catalogue = z.looseObject({ jax_versions: z.array(z.string()), languages: z.array(z.enum(LANGUAGES)), steps: z.array(Step).check(z.minLength(1)) });

export type TourText = z.infer<typeof Text>;
export interface TourStep {
  id: string;
  /** its place in the tour, from 1 (the links' /tour/N) */
  number: number;
  code: string;
  /** the run request the step loads (code included) */
  request: Record<string, unknown>;
  tab: TabId;
  marks: number[];
  edit: { code: { find: string; replace: string }[]; request: Record<string, unknown>; tab: TabId | null };
  text: Record<Lang, TourText>;
}

/** tour/*.py by file name, as text (Vite inlines them). */
const FILES: Record<string, string> = Object.fromEntries(
  Object.entries(import.meta.glob<string>("../../../tour/*.py", { query: "?raw", import: "default", eager: true })).map(([path, text]) => [path.slice(path.lastIndexOf("/") + 1), text]),
);

/** The steps of `json`, each with its code from `files`; throws naming what is wrong. */
export function buildTour(json: unknown, files: Record<string, string>): TourStep[] {
  const parsed = Catalogue.safeParse(json);
  if (!parsed.success) throw new Error(`tour/tour.json: ${parsed.error.issues.map((i) => `${i.code} at ${i.path.join(".")}`).join("; ")}`);
  const seen = new Set<string>();
  return parsed.data.steps.map((s, i) => {
    if (seen.has(s.id)) throw new Error(`tour/tour.json: the id ${s.id} is used twice`);
    seen.add(s.id);
    const code = files[s.file];
    if (code === undefined) throw new Error(`tour/tour.json: ${s.id} names tour/${s.file}, which does not exist`);
    return {
      id: s.id,
      number: i + 1,
      code,
      request: { ...s.request, code },
      tab: s.tab,
      marks: s.marks,
      edit: { code: s.try.code ?? [], request: s.try.request ?? {}, tab: s.try.tab ?? null },
      text: s.text,
    };
  });
}

export const TOUR: TourStep[] = buildTour(catalogue, FILES);

/** The step a link names: `/tour/3`, `/tour/grad`, `/tour#grad`; `null` when the
 * address is no tour's; `"unknown"` when it is the tour's but names no step. */
export function stepFromAddress(path: string, hash: string, steps: readonly TourStep[] = TOUR): TourStep | "unknown" | null {
  const m = /^\/tour(?:\/([^/]+))?\/?$/.exec(path);
  if (!m) return null;
  const name = m[1] ?? (/^#([a-z][a-z0-9-]*)$/.exec(hash)?.[1] ?? null);
  if (name === null) return steps[0] ?? null;
  const found = /^[0-9]+$/.test(name) ? steps[Number(name) - 1] : steps.find((s) => s.id === name);
  return found ?? "unknown";
}

/** A step's own link. */
export function pathFor(step: TourStep): string {
  return `/tour/${step.number}`;
}

/** The code after the step's try edit, or null when the code no longer holds the text
 * it replaces (the reader changed it), with the first text not found. */
export function applyCodeEdit(code: string, step: TourStep): { code: string } | { missing: string } {
  let out = code;
  for (const e of step.edit.code) {
    if (!out.includes(e.find)) return { missing: e.find };
    out = out.replace(e.find, e.replace);
  }
  return { code: out };
}

/** The text in `text` with `code` spans apart: [plain, code, plain, …]. */
export function codeSpans(text: string): { code: boolean; text: string }[] {
  return text.split("`").map((part, i) => ({ code: i % 2 === 1, text: part })).filter((p) => p.text !== "");
}
