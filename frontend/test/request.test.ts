import { afterEach, describe, expect, it, vi } from "vitest";
import { EXAMPLES, PRESETS, DEFAULT_STATE } from "../src/model/examples";
import { RunBody, RunRequest } from "../src/generated/request";
import { optInOutput } from "../src/model/registry";
import { fromRequest, loadAutosave, toRequest, type PlayState } from "../src/model/state";
import { fromRequestTransforms, transformName } from "../src/model/transforms";

// The server's RunRequest and RunBody schemas (generated from sandbox/protocol.py and
// backend/app/core/wire.py into src/generated/request.ts) type what the page builds; it
// must also pass them at run time, so a field renamed or narrowed on the server
// fails here, not as a 422 in the browser.
describe("the page's requests against the server's RunRequest schema", () => {
  it("accepts every example's request, compare and mesh included", () => {
    for (const ex of EXAMPLES) {
      const result = RunRequest.safeParse(toRequest({ ...ex.state, backend: "auto" }));
      expect(result.success, `${ex.id}: ${result.error?.message}`).toBe(true);
    }
  });

  it("accepts every preset's pipeline and the page's extras (outputs, flags, version)", () => {
    for (const p of PRESETS) {
      const state = { ...DEFAULT_STATE, steps: p.steps, compare: p.compare };
      expect(RunRequest.safeParse(toRequest(state)).success, p.id).toBe(true);
    }
    const extras: PlayState = { ...DEFAULT_STATE, outputs: ["passes", "memory"], flags: "xla_cpu_enable_fast_math=false", jaxVersion: "0.7.0" };
    const result = RunRequest.safeParse(toRequest(extras));
    expect(result.success, result.error?.message).toBe(true);
  });

  it("is the server's schema: it refuses what the server refuses", () => {
    const ok = toRequest(DEFAULT_STATE);
    expect(RunRequest.safeParse({ ...ok, transforms: [{ name: "jitt" }] }).success).toBe(false);
    expect(RunRequest.safeParse({ ...ok, devices: 65 }).success).toBe(false);
    expect(RunRequest.safeParse({ ...ok, outputs: ["graph"] }).success).toBe(false);
    expect(RunRequest.safeParse({ ...ok, backend: "cuda" }).success).toBe(false);
    expect(RunRequest.safeParse({ ...ok, mesh: { shape: [2], axis_names: ["1x"] } }).success).toBe(false);
  });

  it("sends `cache` only in a run's body: the wire's RunBody takes it, a snippet's RunRequest refuses it", () => {
    const fresh = { ...toRequest(DEFAULT_STATE), cache: false };
    expect(RunBody.safeParse(fresh).success).toBe(true);
    // extra="forbid" on the server: POST /api/v1/snippets answers 422 to a stray field
    expect(RunRequest.safeParse(fresh).success).toBe(false);
    expect(RunBody.safeParse({ ...fresh, cache: "no" }).success).toBe(false);
  });
});

describe("input narrowed to the server's enums", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("takes a menu's transform or output name only when the server knows it", () => {
    expect(transformName("vmap")).toBe("vmap");
    expect(transformName("jitt")).toBeNull();
    expect(transformName("")).toBeNull();
    expect(optInOutput("passes")).toBe("passes");
    expect(optInOutput("jaxpr")).toBeNull(); // a default output, never ticked
    expect(optInOutput("graph")).toBeNull();
    expect(optInOutput(undefined)).toBeNull();
  });

  it("drops what a stored request holds outside them", () => {
    const state = fromRequest({ code: "x", backend: "cuda", outputs: ["passes", "graph", "jaxpr"], transforms: [{ name: "grad" }, { name: "jitt" }] }, DEFAULT_STATE);
    expect(state.backend).toBe("auto");
    expect(state.outputs).toEqual(["passes"]);
    expect(state.steps.map((s) => s.name)).toEqual(["grad"]);
    expect(fromRequestTransforms([{ name: 3 }, null, { name: "jit", static_argnums: [0] }])).toEqual([{ name: "jit", options: { static_argnums: "(0,)" } }]);
  });

  it("reads an autosave field by field: a step or backend of an older page is dropped, not trusted", () => {
    const stored = new Map<string, string>(); // the tests run in Node: no localStorage
    vi.stubGlobal("localStorage", { getItem: (k: string) => stored.get(k) ?? null, setItem: (k: string, v: string) => void stored.set(k, v) });
    localStorage.setItem(
      "jaxplay:state:v1",
      JSON.stringify({ code: "def f(x): return x", steps: [{ name: "grad", options: {} }, { name: "pjit", options: {} }, { name: "jit" }], backend: "cuda", devices: 99, outputs: ["asm", "graph"], entry: 7 }),
    );
    const state = loadAutosave(DEFAULT_STATE);
    expect(state).not.toBeNull();
    expect(state!.steps).toEqual([{ name: "grad", options: {} }]);
    expect(state!.backend).toBe(DEFAULT_STATE.backend);
    expect(state!.devices).toBe(DEFAULT_STATE.devices);
    expect(state!.outputs).toEqual(["asm"]);
    expect(state!.entry).toBe(DEFAULT_STATE.entry);
    expect(RunRequest.safeParse(toRequest(state!)).success).toBe(true);
    localStorage.setItem("jaxplay:state:v1", JSON.stringify({ steps: [] }));
    expect(loadAutosave(DEFAULT_STATE)).toBeNull();
  });
});
