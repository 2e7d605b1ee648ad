// The checks box: its boxes read into the state and written back (fake controls, no
// DOM), and the state into the run request the server's schema accepts, and back.
import { describe, expect, it } from "vitest";
import { checksBindings } from "../src/app/checks-bindings";
import { ControlsController, type Control } from "../src/app/bindings";
import { CHECK_TOGGLES, checksFromRequest, checksFromSaved, checksRequest } from "../src/model/check-choices";
import { DEFAULT_STATE } from "../src/model/examples";
import { RunRequest } from "../src/generated/request";
import { fromRequest, toRequest, type PlayState } from "../src/model/state";

class FakeBox implements Control {
  value = "";
  checked = false;
  dataset: DOMStringMap;
  private listeners: (() => void)[] = [];
  constructor(data: Record<string, string>) {
    this.dataset = { ...data };
  }
  addEventListener(_type: string, listener: () => void): void {
    this.listeners.push(listener);
  }
  tick(on: boolean): void {
    this.checked = on;
    for (const l of this.listeners) l();
  }
}

function setup() {
  const c = {
    checkBoxes: CHECK_TOGGLES.map((t) => new FakeBox({ check: t.name })),
    orderBoxes: ["1", "2", "3"].map((o) => new FakeBox({ gradOrder: o })),
    modeBoxes: ["fwd", "rev"].map((m) => new FakeBox({ gradMode: m })),
    gradOptions: { hidden: true as HTMLElement["hidden"] },
  };
  let state: PlayState = structuredClone(DEFAULT_STATE);
  let changes = 0;
  const controls = new ControlsController(checksBindings(c), () => state, () => changes++);
  const box = (name: string) => c.checkBoxes.find((b) => b.dataset.check === name)!;
  return { c, controls, box, state: () => state, set: (s: PlayState) => (state = s), changes: () => changes };
}

describe("the checks box", () => {
  it("asks for nothing until a check is ticked", () => {
    const req = toRequest(DEFAULT_STATE);
    expect(req).not.toHaveProperty("checks");
    expect(req).not.toHaveProperty("grad_orders");
  });

  it("reads the ticked checks into the request, in the server's order", () => {
    const t = setup();
    t.box("key_reuse").tick(true);
    t.box("nans").tick(true);
    expect(t.changes()).toBe(2);
    const req = toRequest(t.state());
    expect(req.checks).toEqual(["nans", "key_reuse"]);
    expect(() => RunRequest.parse(req)).not.toThrow();
    t.box("nans").tick(false);
    expect(toRequest(t.state()).checks).toEqual(["key_reuse"]);
  });

  it("shows the grad options only with grad, and sends them only when not the defaults", () => {
    const t = setup();
    expect(t.c.gradOptions.hidden).toBe(true);
    t.box("grad").tick(true);
    expect(t.c.gradOptions.hidden).toBe(false);
    expect(toRequest(t.state())).toMatchObject({ checks: ["grad"] });
    expect(toRequest(t.state())).not.toHaveProperty("grad_orders");
    t.c.orderBoxes[1]!.tick(true); // order 2 besides 1
    t.c.modeBoxes[0]!.tick(false); // rev only
    const req = toRequest(t.state());
    expect(req).toMatchObject({ checks: ["grad"], grad_orders: [1, 2], grad_modes: ["rev"] });
    expect(() => RunRequest.parse(req)).not.toThrow();
    t.box("grad").tick(false);
    expect(t.c.gradOptions.hidden).toBe(true);
    expect(toRequest(t.state())).not.toHaveProperty("grad_orders");
  });

  it("comes back from a shared link and from the autosave, and shows in the boxes", () => {
    const stored = { ...toRequest(DEFAULT_STATE), checks: ["grad", "checkify", "bogus"], grad_orders: [2], grad_modes: ["fwd"] };
    const s = fromRequest(stored, DEFAULT_STATE);
    expect(s.checks).toEqual({ names: ["grad", "checkify"], orders: [2], modes: ["fwd"] });
    expect(toRequest(s)).toMatchObject({ checks: ["checkify", "grad"], grad_orders: [2], grad_modes: ["fwd"] });
    expect(checksFromSaved(JSON.parse(JSON.stringify(s.checks)))).toEqual(s.checks);
    const t = setup();
    t.set(s);
    t.controls.show(s);
    expect(t.c.checkBoxes.map((b) => b.checked)).toEqual([false, false, false, true, true]);
    expect(t.c.orderBoxes.map((b) => b.checked)).toEqual([false, true, false]);
    expect(t.c.gradOptions.hidden).toBe(false);
  });

  it("a request without checks restores none", () => {
    expect(checksFromRequest({ code: "" }).names).toEqual([]);
    expect(checksRequest(checksFromRequest({}))).toEqual({});
  });
});
