import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DEFAULT_STATE } from "../src/model/examples";
import { fromRequest, toRequest } from "../src/model/state";
import { applyCodeEdit, buildTour, codeSpans, pathFor, stepFromAddress, TOUR } from "../src/tour/catalogue";

const folder = new URL("../../tour/", import.meta.url);

describe("the tour's catalogue (tour/tour.json + tour/*.py)", () => {
  it("has about fifteen steps, numbered in order, each file once", () => {
    expect(TOUR.length).toBeGreaterThanOrEqual(12);
    expect(TOUR.map((s) => s.number)).toEqual(TOUR.map((_, i) => i + 1));
    const files = readdirSync(folder).filter((f) => f.endsWith(".py"));
    expect(TOUR.length).toBe(files.length);
  });

  it("marks lines that are in each step's code, and its try edit applies to it", () => {
    for (const step of TOUR) {
      const lines = step.code.split("\n").length;
      for (const m of step.marks) expect(m, step.id).toBeLessThanOrEqual(lines);
      const edited = applyCodeEdit(step.code, step);
      expect("code" in edited, step.id).toBe(true);
      if (step.edit.code.length > 0 && "code" in edited) expect(edited.code, step.id).not.toBe(step.code);
      // a try edit changes something: the code or the request
      expect(step.edit.code.length + Object.keys(step.edit.request).length, step.id).toBeGreaterThan(0);
    }
  });

  it("loads each step into the page's state and sends the request the engine tests run", () => {
    for (const step of TOUR) {
      const request = toRequest(fromRequest(step.request, DEFAULT_STATE));
      const want = step.request as Record<string, unknown>;
      expect(request.code, step.id).toBe(step.code);
      expect(request.args, step.id).toBe(want.args);
      expect(request.transforms, step.id).toEqual(want.transforms);
      expect(request.compare, step.id).toEqual(want.compare ?? []);
      expect(request.devices, step.id).toBe(want.devices ?? 1);
      for (const o of (want.outputs as string[] | undefined) ?? []) expect(request.outputs, step.id).toContain(o);
      for (const key of ["checks", "export_shapes", "export_platforms"]) {
        if (key in want) expect((request as Record<string, unknown>)[key], `${step.id} ${key}`).toEqual(want[key]);
      }
      // the try edit's request fields make it through the page's state too
      const tried = toRequest(fromRequest({ ...request, ...step.edit.request }, DEFAULT_STATE)) as Record<string, unknown>;
      for (const [key, value] of Object.entries(step.edit.request)) expect(tried[key], `${step.id} try ${key}`).toEqual(value);
    }
  });

  it("says what is wrong with a bad catalogue", () => {
    const json = { jax_versions: ["default"], languages: ["en", "zh"], steps: [] as unknown[] };
    expect(() => buildTour(json, {})).toThrow(/tour\/tour.json/);
    const text = { title: "t", body: ["b"], try: "x", see: "y" };
    const step = { id: "a", file: "01_a.py", request: { args: "1.0", transforms: [] }, tab: "jaxpr", marks: [1], try: {}, claims: {}, text: { en: text, zh: text } };
    expect(buildTour({ ...json, steps: [step] }, { "01_a.py": "x = 1\n" })[0]!.id).toBe("a");
    expect(() => buildTour({ ...json, steps: [step] }, {})).toThrow("a names tour/01_a.py, which does not exist");
    expect(() => buildTour({ ...json, steps: [step, step] }, { "01_a.py": "" })).toThrow("the id a is used twice");
    expect(() => buildTour({ ...json, steps: [{ ...step, tab: "nope" }] }, { "01_a.py": "" })).toThrow(/tab/);
    expect(() => buildTour({ ...json, steps: [{ ...step, text: { en: text } }] }, { "01_a.py": "" })).toThrow(/zh/);
  });
});

describe("a tour step's address", () => {
  it("is its number, its id, or a #id after /tour", () => {
    expect(stepFromAddress("/tour", "")).toBe(TOUR[0]);
    expect(stepFromAddress("/tour/", "")).toBe(TOUR[0]);
    expect(stepFromAddress("/tour/3", "")).toBe(TOUR[2]);
    expect(stepFromAddress("/tour/grad", "")).toBe(TOUR.find((s) => s.id === "grad"));
    expect(stepFromAddress("/tour", "#vmap")).toBe(TOUR.find((s) => s.id === "vmap"));
    expect(stepFromAddress("/tour/3", "#out=jaxpr")).toBe(TOUR[2]);
    expect(stepFromAddress("/tour/99", "")).toBe("unknown");
    expect(stepFromAddress("/tour/nope", "")).toBe("unknown");
    expect(stepFromAddress("/", "")).toBeNull();
    expect(stepFromAddress("/s/abc", "")).toBeNull();
    expect(stepFromAddress("/tours", "")).toBeNull();
    for (const step of TOUR) expect(stepFromAddress(pathFor(step), "")).toBe(step);
  });
});

describe("the tour's text", () => {
  it("keeps code spans apart", () => {
    expect(codeSpans("use `jnp.where` here")).toEqual([
      { code: false, text: "use " },
      { code: true, text: "jnp.where" },
      { code: false, text: " here" },
    ]);
  });

  it("has every code span of the English in the Chinese (code is never translated)", () => {
    const spans = (s: string): Set<string> => new Set(codeSpans(s).filter((p) => p.code).map((p) => p.text));
    for (const step of TOUR) {
      const all = (lang: "en" | "zh"): string => [step.text[lang].title, ...step.text[lang].body, step.text[lang].try, step.text[lang].see].join(" ");
      const zh = spans(all("zh"));
      for (const span of spans(all("en"))) expect(zh.has(span), `${step.id}: ${span}`).toBe(true);
    }
  });
});
