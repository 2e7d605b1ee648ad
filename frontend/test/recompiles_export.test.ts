// The recompiles and export panes' parts that need no DOM: the events the engine makes
// (trimmed from a real run on jax 0.12.0.1) parse, the editor's marks land on the call
// sites' lines, the sums add up, the artifact's download holds its bytes.
import { EditorState } from "@codemirror/state";
import { describe, expect, it } from "vitest";
import { recompileDecorations, recompileField, setRecompileMarks } from "../src/editor/editor-recompiles";
import { artifactBlob } from "../src/panes/export";
import { totals } from "../src/panes/recompiles";
import { parseEvent } from "../src/connection/protocol";

const miss = (reason: string, explanation: string | null, ms: [number, number, number]) => ({ explanation, reason, trace_ms: ms[0], lower_ms: ms[1], compile_ms: ms[2], from_disk: false });
const RECOMPILES = {
  type: "recompiles",
  pipeline: "main",
  counts_calls: true,
  notes: [],
  sites: [
    { line: 9, function: "g", caller: "<module>", jitted: true, calls: 3, hits: 1, miss_count: 2, misses: [miss("first call", "TRACING CACHE MISS at snippet.py:9:4 (<module>):\n  never seen function:\n    g defined at snippet.py:4", [1.4, 5.9, 60.5]), miss("x: f32[3] → f32[4]", "TRACING CACHE MISS at snippet.py:9:4 (<module>):\n  for g defined at snippet.py:4\n  all previously seen cache keys differ. For the closest previous key:\n  different input types:\n  * at x, now f32[4] and before f32[3]", [9.8, 0.8, 44.0])], trace_ms: 11.2, lower_ms: 6.7, compile_ms: 104.5, summary: "2 compiles, 1 hit — x: f32[3] → f32[4]", silent: null },
    { line: 11, function: "sin", caller: "<module>", jitted: true, calls: 1, hits: 0, miss_count: 1, misses: [miss("JAX gave no explanation for this compile", null, [9.0, 0.8, 48.5])], trace_ms: 9.0, lower_ms: 0.8, compile_ms: 48.5, summary: "1 compile, 0 hits — JAX gave no explanation", silent: "JAX explains no miss of a jit whose target is itself jitted (jax.jit(jnp.sin)): it compiled, but JAX does not say why" },
  ],
};

describe("recompiles", () => {
  it("parses as the protocol's event and sums its sites", () => {
    const parsed = parseEvent(RECOMPILES);
    expect(parsed).toMatchObject({ ok: true });
    if (!parsed.ok || parsed.event.type !== "recompiles") throw new Error("not parsed");
    const ev = parsed.event;
    const t = totals(ev.sites);
    expect(t.misses).toBe(3);
    expect(t.hits).toBe(1);
    expect(t.compile).toBeCloseTo(153.0, 5);
  });

  it("marks each call site's line in the editor, with its summary, and clears them", () => {
    const doc = Array.from({ length: 12 }, (_, i) => `line ${i + 1}`).join("\n");
    let state = EditorState.create({ doc, extensions: [recompileField] });
    state = state.update({ effects: setRecompileMarks.of(RECOMPILES.sites.map((s) => ({ line: s.line, text: s.summary }))) }).state;
    const marked: { line: number; widget: boolean }[] = [];
    state.field(recompileField).between(0, state.doc.length, (from, _to, deco) => {
      marked.push({ line: state.doc.lineAt(from).number, widget: deco.spec.widget !== undefined });
    });
    expect(marked).toEqual([
      { line: 9, widget: false },
      { line: 9, widget: true },
      { line: 11, widget: false },
      { line: 11, widget: true },
    ]);
    state = state.update({ effects: setRecompileMarks.of([]) }).state;
    expect(state.field(recompileField).size).toBe(0);
  });

  it("joins two sites of one line and drops lines past the end", () => {
    const state = EditorState.create({ doc: "a\nb" });
    const deco = recompileDecorations(state.doc, [{ line: 2, text: "1 compile" }, { line: 2, text: "2 compiles" }, { line: 7, text: "gone" }]);
    const widgets: string[] = [];
    deco.between(0, state.doc.length, (_f, _t, d) => {
      if (d.spec.widget) widgets.push((d.spec.widget as { text: string }).text);
    });
    expect(widgets).toEqual(["1 compile · 2 compiles"]);
  });
});

describe("export", () => {
  it("parses the engine's event and its artifact downloads as its bytes", async () => {
    const bytes = new Uint8Array([0x40, 0, 0, 0, 0x3a, 0xff]);
    const base64 = btoa(String.fromCharCode(...bytes));
    const parsed = parseEvent({ type: "export", pipeline: "main", function: "f", shapes: ["b, 3"], in_avals: ["float32[b,3]"], out_avals: ["float32[b,6]"], platforms: ["cpu", "cuda", "tpu"], calling_convention_version: 10, stablehlo: "func.func public @main(%arg0: tensor<?x3xf32>)", artifact: base64, artifact_bytes: 6, roundtrip: [{ source: "arguments", inputs: ["float32[4,3]"], outputs: ["float32[4,6]"], equal: true, max_abs_diff: 0, error: null }], notes: [] });
    expect(parsed).toMatchObject({ ok: true, event: { type: "export", in_avals: ["float32[b,3]"] } });
    const blob = artifactBlob(base64);
    expect(new Uint8Array(await blob.arrayBuffer())).toEqual(bytes);
  });
});

describe("the export fields", () => {
  it("go into the request only when export is ticked, and come back as typed", async () => {
    const { toRequest, fromRequest } = await import("../src/model/state");
    const { DEFAULT_STATE } = await import("../src/model/examples");
    const state = { ...structuredClone(DEFAULT_STATE), exportShapes: "b, 3; ", exportPlatforms: "cpu, tpu" };
    expect(toRequest(state).export_shapes).toBeUndefined();
    const problems: { message: string }[] = [];
    const request = toRequest({ ...state, outputs: ["export"] }, problems as never);
    expect(problems).toEqual([]);
    expect(request.export_shapes).toEqual(["b, 3", null]);
    expect(request.export_platforms).toEqual(["cpu", "tpu"]);
    const back = fromRequest(request, DEFAULT_STATE);
    expect([back.exportShapes, back.exportPlatforms]).toEqual(["b, 3; ", "cpu, tpu"]);
  });

  it("say what does not parse", async () => {
    const { exportRequest } = await import("../src/model/export_fields");
    const problems: string[] = [];
    expect(exportRequest({ exportShapes: "b; x[0]", exportPlatforms: "cpu, gpu" }, problems)).toEqual({});
    expect(problems).toHaveLength(2);
  });
});
