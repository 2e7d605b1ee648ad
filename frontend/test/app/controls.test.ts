// Controls <-> state: each plain field read into the state and written back, against
// fake controls (no DOM).
import { describe, expect, it } from "vitest";
import { ControlsController, fieldBindings, type Control } from "../../src/app/bindings";
import { DEFAULT_STATE } from "../../src/model/examples";
import type { PlayState } from "../../src/model/state";

class FakeControl implements Control {
  value = "";
  checked = false;
  dataset: DOMStringMap;
  private listeners: (() => void)[] = [];
  constructor(data: Record<string, string> = {}) {
    this.dataset = { ...data };
  }
  addEventListener(_type: string, listener: () => void): void {
    this.listeners.push(listener);
  }
  /** the user changes it */
  set(value: string | boolean): void {
    if (typeof value === "boolean") this.checked = value;
    else this.value = value;
    for (const l of this.listeners) l();
  }
}

function setup() {
  const c = {
    entry: new FakeControl(),
    args: new FakeControl(),
    backend: new FakeControl(),
    jaxVersion: new FakeControl(),
    devices: new FakeControl(),
    flags: new FakeControl(),
    flagsB: new FakeControl(),
    configBoxes: [new FakeControl({ config: "jax_enable_x64" })],
    outputBoxes: [new FakeControl({ output: "asm" }), new FakeControl({ output: "memory" })],
  };
  let state: PlayState = structuredClone(DEFAULT_STATE);
  let changes = 0;
  const followed: string[] = [];
  const controls = new ControlsController(
    fieldBindings(c, { entry: () => followed.push("entry"), devices: () => followed.push("devices") }),
    () => state,
    () => changes++,
  );
  return { c, controls, state: () => state, set: (s: PlayState) => (state = s), changes: () => changes, followed };
}

describe("ControlsController", () => {
  it("reads each field into the state, and says it changed", () => {
    const t = setup();
    t.c.entry.set("g");
    t.c.args.set("(1.0,)");
    t.c.flags.set("xla_cpu_enable_fast_math=true");
    t.c.jaxVersion.set("0.4.30");
    t.c.configBoxes[0]!.set(true);
    t.c.outputBoxes[1]!.set(true);
    const s = t.state();
    expect([s.entry, s.args, s.flags, s.jaxVersion]).toEqual(["g", "(1.0,)", "xla_cpu_enable_fast_math=true", "0.4.30"]);
    expect(s.config["jax_enable_x64"]).toBe(true);
    expect(s.outputs).toEqual(["memory"]);
    expect(t.changes()).toBe(6);
    expect(t.followed).toEqual(["entry"]);
  });

  it("refuses a device count out of 1..64 and a backend the request does not know", () => {
    const t = setup();
    const before = t.state().devices;
    t.c.devices.set("100");
    t.c.backend.set("no-such-backend");
    expect(t.state().devices).toBe(before);
    expect(t.changes()).toBe(0);
    t.c.devices.set("8");
    expect(t.state().devices).toBe(8);
    expect(t.followed).toEqual(["devices"]);
  });

  it("writes a state into every field", () => {
    const t = setup();
    const s: PlayState = { ...structuredClone(DEFAULT_STATE), entry: "h", args: "(2,)", devices: 4, flags: "a=1", compareFlags: "b=2", outputs: ["asm"], config: { jax_enable_x64: true } };
    t.controls.show(s);
    expect([t.c.entry.value, t.c.args.value, t.c.devices.value, t.c.flags.value, t.c.flagsB.value]).toEqual(["h", "(2,)", "4", "a=1", "b=2"]);
    expect(t.c.outputBoxes.map((b) => b.checked)).toEqual([true, false]);
    expect(t.c.configBoxes[0]!.checked).toBe(true);
  });
});
