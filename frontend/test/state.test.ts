import { describe, expect, it } from "vitest";
import { DEFAULT_STATE, EXAMPLES, PRESETS } from "../src/model/examples";
import { fromRequest, snippetIdFromPath, toRequest } from "../src/model/state";

describe("state", () => {
  it("builds the SPEC §1 request, compare included", () => {
    const ex = EXAMPLES.find((e) => e.id === "jacfwd-jacrev")!;
    const req = toRequest({ ...ex.state, backend: "cpu" });
    expect(req).toMatchObject({
      entry: "f",
      transforms: [{ name: "jacfwd" }, { name: "jit" }],
      compare: [[{ name: "jacrev" }, { name: "jit" }]],
      backend: "cpu",
      devices: 1,
    });
  });

  it("restores a stored snippet", () => {
    const stored = { code: "def f(x):\n    return x\n", args: "1.0", transforms: [{ name: "pmap", axis_name: "i" }], devices: 4, compare: [[{ name: "jit" }]] };
    const s = fromRequest(stored, DEFAULT_STATE);
    expect(s.steps).toEqual([{ name: "pmap", options: { axis_name: "i" } }]);
    expect(s.compare).toEqual([{ name: "jit", options: {} }]);
    expect(s.devices).toBe(4);
    expect(toRequest(s)).toMatchObject({ transforms: stored.transforms, compare: stored.compare, devices: 4, entry: "f" });
  });

  it("names a JAX version only when one is picked, and a link keeps it", () => {
    expect(toRequest(DEFAULT_STATE)).not.toHaveProperty("jax_version");
    expect(toRequest({ ...DEFAULT_STATE, jaxVersion: "" })).not.toHaveProperty("jax_version");
    const pinned = toRequest({ ...DEFAULT_STATE, jaxVersion: "0.10.2" });
    expect(pinned.jax_version).toBe("0.10.2");
    expect(fromRequest(pinned, DEFAULT_STATE).jaxVersion).toBe("0.10.2");
    expect(fromRequest({ code: "x = 1\n" }, DEFAULT_STATE).jaxVersion).toBe("");
  });

  it("a link keeps a longer limit and the cost before optimisation, never the default limit", () => {
    expect(toRequest(DEFAULT_STATE)).not.toHaveProperty("timeout_s");
    expect(toRequest(DEFAULT_STATE)).not.toHaveProperty("cost_before");
    const longer = toRequest({ ...DEFAULT_STATE, timeoutS: 60, costBefore: true });
    expect(longer).toMatchObject({ timeout_s: 60, cost_before: true });
    expect(fromRequest(longer, DEFAULT_STATE)).toMatchObject({ timeoutS: 60, costBefore: true });
    // the store keeps every default (timeout_s 20): a link of the default runs with the
    // server's default, whatever it is then; a value out of the request's bounds is dropped
    for (const timeout_s of [20, 5, -1, 10_000, "60"]) {
      const back = fromRequest({ code: "x = 1\n", timeout_s }, DEFAULT_STATE);
      expect(back.timeoutS, String(timeout_s)).toBeUndefined();
      expect(toRequest(back)).not.toHaveProperty("timeout_s");
    }
  });

  it("every example and preset makes a valid request", () => {
    for (const ex of EXAMPLES) {
      const problems: unknown[] = [];
      toRequest({ ...ex.state, backend: "auto" }, problems as never);
      expect(problems, ex.id).toEqual([]);
    }
    for (const p of PRESETS) {
      if (p.example) expect(EXAMPLES.some((e) => e.id === p.example), p.id).toBe(true);
    }
  });

  it("reads snippet ids from /s/ paths", () => {
    expect(snippetIdFromPath("/s/abc123")).toBe("abc123");
    expect(snippetIdFromPath("/")).toBeNull();
    expect(snippetIdFromPath("/s/../x")).toBeNull();
  });
});
