import { describe, expect, it } from "vitest";
import { acrossBody, acrossChoices, AcrossAnswer, diffLineKind, outputTitle, timesTable, verdict, type OutputChange } from "../src/model/across-versions";
import { DEFAULT_STATE } from "../src/model/examples";
import { fmtAgo } from "../src/util/format";
import { toRequest } from "../src/model/state";

const VERSIONS = [
  { version: "0.4.38", installed: true, default: false },
  { version: "0.5.3", installed: false, default: false },
  { version: "0.10.2", installed: true, default: false },
  { version: "0.12.0.1", installed: true, default: true },
];

describe("across versions: the request", () => {
  it("offers the installed versions, ticking the newest two unless some were kept", () => {
    expect(acrossChoices(VERSIONS, undefined)).toEqual({ offered: ["0.4.38", "0.10.2", "0.12.0.1"], ticked: ["0.10.2", "0.12.0.1"] });
    // a kept version no longer installed here is dropped; none left: the newest two
    expect(acrossChoices(VERSIONS, ["0.4.38", "0.5.3"]).ticked).toEqual(["0.4.38"]);
    expect(acrossChoices(VERSIONS, ["0.5.3"]).ticked).toEqual(["0.10.2", "0.12.0.1"]);
    expect(acrossChoices([], ["0.4.38"])).toEqual({ offered: [], ticked: [] });
  });

  it("names the versions in `versions`, never the request's jax_version", () => {
    const request = { ...toRequest(DEFAULT_STATE), jax_version: "0.10.2" };
    const made = acrossBody(request, ["0.12.0.1", "0.4.38"]);
    if (!("body" in made)) throw new Error(made.problem);
    expect(made.body.versions).toEqual(["0.12.0.1", "0.4.38"]);
    expect(made.body.request).not.toHaveProperty("jax_version");
    expect(made.body.request.code).toBe(request.code);
    expect(request.jax_version).toBe("0.10.2"); // the caller's request is left alone
  });

  it("says what is wrong with too few or too many versions", () => {
    const request = toRequest(DEFAULT_STATE);
    expect(acrossBody(request, ["0.4.38"])).toEqual({ problem: "Tick at least 2 versions to compare (1 ticked)." });
    expect(acrossBody(request, ["0.4.38", "0.4.38"])).toHaveProperty("problem");
    const ten = Array.from({ length: 10 }, (_, i) => `0.${i}.0`);
    expect(acrossBody(request, ten)).toEqual({ problem: "At most 9 versions in one comparison (10 ticked)." });
  });
});

// as the server answers (docs/api.md, "Across versions")
const ANSWER = {
  versions: [
    { version: "0.4.38", status: "ok", reason: "", jax_version: "0.4.38", errors: {} },
    { version: "0.7.2", status: "ok", reason: "", jax_version: "0.7.2", errors: {} },
    { version: "0.12.0.1", status: "error", reason: "", jax_version: "0.12.0.1", errors: { main: "TypeError at trace: boom" } },
  ],
  outputs: [
    {
      output: "jaxpr",
      pipeline: "main",
      first_changed: "0.7.2",
      missing: ["0.12.0.1"],
      changes: [
        { from: "0.4.38", to: "0.7.2", diff: "--- 0.4.38\n+++ 0.7.2\n@@ -1,2 +1,2 @@\n { lambda ; a:f32[3]. let\n-    b:f32[3] = sin a\n+    b:f32[3] = cos a" },
        { from: "0.7.2", to: "0.12.0.1", diff: "--- 0.7.2\n+++ 0.12.0.1\n@@ -1 +1 @@\n-x\n+(not produced)" },
      ],
    },
    { output: "value", pipeline: "main", first_changed: null, missing: [], changes: [] },
    { output: "hlo", pipeline: "0", first_changed: null, missing: ["0.12.0.1"], changes: [] },
  ],
  times: [
    { version: "0.4.38", trace_ms: 3.1, lower_ms: 5.0, compile_ms: 20.0, execute_ms: 0.9, median_ms: { "jit(f)": 0.005 } },
    { version: "0.7.2", trace_ms: 3.0, lower_ms: 5.2, compile_ms: 31.0, execute_ms: 0.5, median_ms: { "jit(f)": 0.005, f: 0.2 } },
    { version: "0.12.0.1", trace_ms: 2.0, lower_ms: null, compile_ms: null, execute_ms: null, median_ms: {} },
  ],
};

describe("across versions: the answer", () => {
  const answer = AcrossAnswer.parse(ANSWER);
  const [jaxpr, value, hlo] = answer.outputs as [OutputChange, OutputChange, OutputChange];

  it("validates the server's answer and refuses a malformed one", () => {
    expect(answer.versions.map((v) => v.version)).toEqual(["0.4.38", "0.7.2", "0.12.0.1"]);
    expect(AcrossAnswer.safeParse({ ...ANSWER, outputs: [{ output: "jaxpr" }] }).success).toBe(false);
  });

  it("says per output where it first changed, and what was missing", () => {
    expect(verdict(jaxpr)).toBe("first changed in 0.7.2 (from 0.4.38), and 1 later change; not produced by 0.12.0.1");
    expect(verdict(value)).toBe("the same on every version");
    expect(verdict(hlo)).toBe("the same on every version; not produced by 0.12.0.1");
    expect(outputTitle("stablehlo", "main")).toBe("StableHLO");
    expect(outputTitle("hlo", "0")).toBe("HLO (B)");
  });

  it("classifies the lines of a unified diff", () => {
    const kinds = jaxpr.changes[0]!.diff.split("\n").map(diffLineKind);
    expect(kinds).toEqual(["head", "head", "hunk", "same", "del", "add"]);
  });

  it("tabulates stage times and timing medians per version, marking big moves", () => {
    const t = timesTable(answer.times);
    expect(t.columns).toEqual(["trace", "lower", "compile", "execute", "jit(f) per call", "f per call"]);
    expect(t.rows.map((r) => r.version)).toEqual(["0.4.38", "0.7.2", "0.12.0.1"]);
    const [first, second, third] = t.rows;
    expect(first!.cells.map((c) => c.trend)).toEqual([null, null, null, null, null, null]);
    expect(first!.cells[5]!.text).toBe("—"); // 0.4.38 has no row "f"
    // compile 20 → 31 ms is ≥ 1.5×: slower; execute 0.9 → 0.5 ms: faster
    expect(second!.cells.map((c) => c.trend)).toEqual([null, null, "slower", "faster", null, null]);
    expect(second!.cells[2]!.text).toBe("31.0 ms");
    expect(third!.cells.map((c) => c.text)).toEqual(["2.000 ms", "—", "—", "—", "—", "—"]);
  });
});

describe("a cached answer's age", () => {
  it("is said in words", () => {
    expect(fmtAgo(0)).toBe("less than a minute ago");
    expect(fmtAgo(59.9)).toBe("less than a minute ago");
    expect(fmtAgo(185)).toBe("3 min ago");
    expect(fmtAgo(3 * 3600 + 5)).toBe("3 h ago");
    expect(fmtAgo(5 * 86400)).toBe("5 days ago");
  });
});
