import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { buildExamples, EXAMPLE_FILES, EXAMPLES } from "../src/model/examples";

const folder = new URL("../../examples/", import.meta.url);

describe("the examples menu (examples/menu.json + examples/*.py)", () => {
  it("lists every file in examples/, once, with the file's text as its code", () => {
    const files = readdirSync(folder).filter((f) => f.endsWith(".py")).sort();
    expect(EXAMPLES.map((e) => e.file).sort()).toEqual(files);
    for (const e of EXAMPLES) expect(e.state.code, e.id).toBe(readFileSync(new URL(e.file, folder), "utf8"));
  });

  it("keeps the ids the browser tests and links use", () => {
    const ids = EXAMPLES.map((e) => e.id);
    for (const id of ["grad-loss", "per-example", "jacfwd-jacrev", "scan-vs-loop", "sharp-bit", "pmap", "sharding-2d-layer"]) {
      expect(ids).toContain(id);
    }
    expect(EXAMPLES[0]!.id).toBe("grad-loss");
  });

  it("defines each entry the page sets up in its code", () => {
    for (const e of EXAMPLES) expect(e.state.code, e.id).toMatch(new RegExp(`^def ${e.state.entry}\\(`, "m"));
  });

  it("says which entry is wrong, and how", () => {
    const one = { id: "a", title: "A", file: "a.py", args: "1.0", steps: [{ name: "jit" }] };
    expect(() => buildExamples({ examples: [one] }, {})).toThrow("a names examples/a.py, which does not exist");
    expect(() => buildExamples({ examples: [one, one] }, { "a.py": "" })).toThrow("the id a is used twice");
    expect(() => buildExamples({ examples: [{ ...one, steps: "jit" }] }, { "a.py": "" })).toThrow(/steps/);
    expect(() => buildExamples({ examples: [{ ...one, stpes: [] }] }, { "a.py": "" })).toThrow(/stpes/);
    // a step's name is checked against the server's TransformName
    expect(() => buildExamples({ examples: [{ ...one, compare: [{ name: "pjit" }] }] }, { "a.py": "" })).toThrow(/expected one of "jit".*→ at examples\[0\]\.compare\[0\]\.name/s);
    expect(buildExamples({ examples: [one] }, { "a.py": "def f(x): ..." })[0]!.state).toMatchObject({ entry: "f", compare: null, devices: 1, config: {} });
  });

  it("reads the files Vite inlines by name", () => {
    expect(Object.keys(EXAMPLE_FILES)).toContain("grad_of_loss.py");
  });
});
