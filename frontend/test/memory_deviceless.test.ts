import { describe, expect, it } from "vitest";
import { devicelessNote } from "../src/panes/memory";

describe("the memory view's note beside a deviceless TPU compile (issue 50)", () => {
  it("says how close a deviceless TPU compile was measured to be", () => {
    const note = devicelessNote({ capacity_bytes: 16_909_336_064, device_kind: "TPU v5 lite" });
    expect(note).toContain("Measured on a TPU v5e");
    expect(note).toContain("the same mesh");
  });

  it("says nothing for a run on its own device, or a GPU target (not measured)", () => {
    expect(devicelessNote({ capacity_bytes: null, device_kind: null })).toBeNull();
    expect(devicelessNote({ capacity_bytes: 80e9, device_kind: "NVIDIA H100 80GB HBM3" })).toBeNull();
  });
});
