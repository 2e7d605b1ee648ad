import { describe, expect, it } from "vitest";
import { precisionNote } from "../src/model/precision";

describe("the worker line's matmul precision (issue 50)", () => {
  it("says nothing on a CPU, or for a worker that does not say", () => {
    expect(precisionNote({ platform: "cpu", matmul_precision: "default" })).toBe("");
    expect(precisionNote({ platform: "tpu" })).toBe("");
    expect(precisionNote(null)).toBe("");
  });

  it("says a TPU's default passes float32 through bfloat16, and how to get float32's", () => {
    const note = precisionNote({ platform: "tpu", matmul_precision: "default" });
    expect(note).toContain("bfloat16");
    expect(note).toContain("jax.default_matmul_precision('highest')");
  });

  it("says a GPU's default may use TensorFloat-32, and names a precision the run set", () => {
    expect(precisionNote({ platform: "gpu", matmul_precision: "default" })).toContain("TensorFloat-32");
    expect(precisionNote({ platform: "tpu", matmul_precision: "highest" })).toBe("matmul precision highest");
  });

  it("takes the run's config over the worker's default", () => {
    const tpu = { platform: "tpu", matmul_precision: "default" };
    expect(precisionNote(tpu, { jax_default_matmul_precision: "highest" })).toBe("matmul precision highest");
    expect(precisionNote(tpu, { jax_enable_x64: true })).toContain("bfloat16");
  });
});
