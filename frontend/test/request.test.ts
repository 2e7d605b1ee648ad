import { describe, expect, it } from "vitest";
import { EXAMPLES, PRESETS, DEFAULT_STATE } from "../src/examples";
import { RunRequest } from "../src/generated/request";
import { toRequest } from "../src/state";

// The server's RunRequest schema (generated from sandbox/protocol.py into
// src/generated/request.ts): what the page builds must pass it, so a field renamed
// or narrowed on the server fails here, not as a 422 in the browser.
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
    const extras = { ...DEFAULT_STATE, outputs: ["passes", "memory"], flags: "xla_cpu_enable_fast_math=false", jaxVersion: "0.7.0" };
    const result = RunRequest.safeParse(toRequest(extras));
    expect(result.success, result.error?.message).toBe(true);
  });

  it("is the server's schema: it refuses what the server refuses", () => {
    const ok = toRequest(DEFAULT_STATE);
    expect(RunRequest.safeParse({ ...ok, transforms: [{ name: "jitt" }] }).success).toBe(false);
    expect(RunRequest.safeParse({ ...ok, devices: 65 }).success).toBe(false);
    expect(RunRequest.safeParse({ ...ok, outputs: ["graph"] }).success).toBe(false);
    expect(RunRequest.safeParse({ ...ok, mesh: { shape: [2], axis_names: ["1x"] } }).success).toBe(false);
  });
});
