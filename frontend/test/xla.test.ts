import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DEFAULT_STATE } from "../src/model/examples";
import { fromRequest, toRequest } from "../src/model/state";
import { applyUnifiedDiff, changedLines, filterPasses, metadataOnly, parseFlags, passTexts, type PassItem } from "../src/model/xla";

// diffs written by Python's difflib, as the engine writes them (sandbox/engine/core/xla_dump.py)
const cases = JSON.parse(readFileSync(new URL("./fixtures/unified-diffs.json", import.meta.url), "utf8")) as { before: string; after: string; diff: string }[];

describe("applyUnifiedDiff", () => {
  it.each(cases.map((c, i) => [i, c] as const))("rebuilds difflib's case %i", (_i, c) => {
    expect(applyUnifiedDiff(c.before, c.diff)).toBe(c.after);
  });

  it("refuses a diff that does not fit the text", () => {
    const c = cases[0]!;
    expect(() => applyUnifiedDiff(c.before.replace("b", "q"), c.diff)).toThrow(/does not apply/);
  });
});

const item = (pass: string, text: string | null, diff: string | null = null): PassItem => ({ pipeline: "p", pass, text, diff, sources: [] });

describe("passTexts", () => {
  it("rebuilds items that carry a diff from the one before", () => {
    const c = cases[0]!;
    const texts = passTexts([item("before-optimizations", c.before), item("x", null, c.diff), item("last", "end\n")]);
    expect(texts.map((t) => t.text)).toEqual([c.before, c.after, "end\n"]);
    expect(texts[1]!.sources).toEqual([]);
  });
});

describe("filterPasses", () => {
  const base = '%a = f32[] add(%x, %y), metadata={op_name="jit(f)/add" stack_frame_id=1}\n';
  const texts = passTexts([
    item("before-optimizations", base),
    item("algsimp", base.replace("add(", "multiply(")),
    item("metadata-pass", base.replace("add(", "multiply(").replace("stack_frame_id=1", "stack_frame_id=2")),
    item("fusion", "%fusion = f32[] fusion(%x)\n"),
  ]);

  it("keeps the first item and matches the query on pipeline and pass", () => {
    expect(filterPasses(texts, "ALGS", false).map((t) => t.pass)).toEqual(["before-optimizations", "algsimp"]);
  });

  it("hides passes that changed only metadata", () => {
    expect(metadataOnly(texts[1]!.text, texts[2]!.text)).toBe(true);
    expect(metadataOnly(texts[0]!.text, texts[1]!.text)).toBe(false);
    expect(filterPasses(texts, "", true).map((t) => t.pass)).toEqual(["before-optimizations", "algsimp", "fusion"]);
    expect(filterPasses(texts, "", false)).toHaveLength(4);
  });
});

describe("changedLines", () => {
  it("counts removed and added lines", () => {
    expect(changedLines("a\nb\nc", "a\nc\nd\ne")).toEqual({ removed: 1, added: 2 });
  });
});

describe("parseFlags", () => {
  it("reads name=value pairs with their types", () => {
    const { options, problems } = parseFlags("xla_cpu_enable_fast_math=true --xla_backend_optimization_level=1\nxla_disable_hlo_passes=algsimp,fusion xla_disable_all_hlo_passes");
    expect(problems).toEqual([]);
    expect(options).toEqual({
      xla_cpu_enable_fast_math: true,
      xla_backend_optimization_level: 1,
      xla_disable_hlo_passes: "algsimp,fusion",
      xla_disable_all_hlo_passes: true,
    });
  });

  it("names what is not a flag", () => {
    expect(parseFlags("jax_enable_x64=true").problems).toEqual(["jax_enable_x64 is not an XLA flag (xla_…)"]);
    expect(parseFlags("  ").options).toEqual({});
  });
});

describe("the request's XLA outputs and flags", () => {
  it("asks for the opted-in outputs beside the defaults, and for nothing extra by default", () => {
    expect(toRequest(DEFAULT_STATE)).not.toHaveProperty("outputs");
    const req = toRequest({ ...DEFAULT_STATE, outputs: ["passes", "memory"] });
    expect(req.outputs).toEqual(["jaxpr", "stablehlo", "hlo", "value", "cost", "timing", "shapes", "passes", "memory"]);
    // the checks output is the request's checks' to make, never asked for by name
    expect(req.outputs).not.toContain("checks");
  });

  it("sends flags A for every pipeline and flags B for pipeline B, and reads them back", () => {
    const state = { ...DEFAULT_STATE, compare: DEFAULT_STATE.steps, flags: "xla_cpu_enable_fast_math", compareFlags: "xla_disable_all_hlo_passes=true" };
    const problems: { step: number; option: string; message: string }[] = [];
    const req = toRequest(state, problems);
    expect(problems).toEqual([]);
    expect(req.compiler_options).toEqual({ xla_cpu_enable_fast_math: true });
    expect(req.compare_compiler_options).toEqual([{ xla_disable_all_hlo_passes: true }]);
    const back = fromRequest(JSON.parse(JSON.stringify(req)), DEFAULT_STATE);
    expect([back.flags, back.compareFlags]).toEqual(["xla_cpu_enable_fast_math", "xla_disable_all_hlo_passes"]);
  });

  it("names a flag that is not one", () => {
    const problems: { step: number; option: string; message: string }[] = [];
    toRequest({ ...DEFAULT_STATE, flags: "fast=1" }, problems);
    expect(problems.map((p) => p.option)).toEqual(["XLA flags A"]);
  });
});
