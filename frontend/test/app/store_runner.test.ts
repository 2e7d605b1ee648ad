// The state's holder (views in order, the autosave a moment after the last change,
// none in the embed view), Run (problems said instead of sent; across mode; a run
// labelled and sent) and the GPU menu of the targets controller.
import { describe, expect, it } from "vitest";
import { Runner, type RunnerDeps } from "../../src/app/runner";
import { PlayStore, SAVE_AFTER_MS, type Timers } from "../../src/app/store";
import { gpuChoices } from "../../src/app/targets-controller";
import type { RunBody } from "../../src/generated/request";
import { DEFAULT_STATE } from "../../src/model/examples";
import type { PlayState } from "../../src/model/state";

/** Timers the test fires by hand. */
function fakeTimers(): Timers & { fire(): void; pending: Map<number, { work: () => void; ms: number }> } {
  const pending = new Map<number, { work: () => void; ms: number }>();
  let next = 1;
  return {
    pending,
    set: (work, ms) => (pending.set(next, { work, ms }), next++),
    clear: (id) => void pending.delete(id),
    fire: () => {
      for (const [id, t] of [...pending]) {
        pending.delete(id);
        t.work();
      }
    },
  };
}

describe("PlayStore", () => {
  it("shows a copy of a state through every view, in order, then saves it once", () => {
    const saved: PlayState[] = [];
    const timers = fakeTimers();
    const store = new PlayStore(DEFAULT_STATE, (s) => saved.push(structuredClone(s)), timers);
    const seen: string[] = [];
    store.onShow((s) => seen.push(`code ${s.entry}`));
    store.onShow((s) => seen.push(`steps ${s.steps.length}`));
    const shown = { ...structuredClone(DEFAULT_STATE), entry: "g" };
    store.show(shown);
    expect(seen).toEqual(["code g", `steps ${shown.steps.length}`]);
    expect(store.state).not.toBe(shown);
    store.state.args = "(2.0,)";
    store.changed(); // a second change before the first is saved: one save
    expect([...timers.pending.values()].map((t) => t.ms)).toEqual([SAVE_AFTER_MS]);
    timers.fire();
    expect(saved.map((s) => [s.entry, s.args])).toEqual([["g", "(2.0,)"]]);
  });

  it("never saves in the embed view", () => {
    const timers = fakeTimers();
    const store = new PlayStore(DEFAULT_STATE, null, timers);
    store.show(DEFAULT_STATE);
    store.changed();
    expect(timers.pending.size).toBe(0);
  });
});

function runner(state: PlayState, acrossOn = false) {
  const log: string[] = [];
  const sent: RunBody[] = [];
  const deps: RunnerDeps = {
    store: { state, changed: () => void log.push("changed") },
    follower: { follow: () => void log.push("follow") },
    outputs: {
      showProblems: (p) => void log.push(`problems ${p.length}`),
      label: (_s, r) => void log.push(`label ${r.entry ?? "f"}`),
      clearErrors: () => void log.push("clear errors"),
    },
    across: {
      on: acrossOn,
      setMode: (on) => void log.push(`across ${on}`),
      run: async () => void log.push("across run"),
    },
    runs: { send: async (r) => void (sent.push(r), log.push("send")) },
  };
  return { run: new Runner(deps), log, sent };
}

describe("Runner", () => {
  it("labels and sends the state's request, the args following the code first", async () => {
    const { run, log, sent } = runner(structuredClone(DEFAULT_STATE));
    await run.run();
    expect(log).toEqual(["follow", "label f", "send"]);
    expect(sent[0]!.code).toBe(DEFAULT_STATE.code);
  });

  it("says what does not parse instead of sending, and leaves across mode", async () => {
    const state = structuredClone(DEFAULT_STATE);
    state.steps = [{ name: "vmap", options: { in_axes: "((" } }];
    const { run, log, sent } = runner(state, true);
    await run.run();
    expect(log).toEqual(["follow", "problems 1", "across false"]);
    expect(sent).toEqual([]);
  });

  it("keeps a longer limit for the runs after, and in the state a link is made from", async () => {
    const state = structuredClone(DEFAULT_STATE);
    const { run, log, sent } = runner(state);
    await run.run(60);
    await run.run();
    expect(sent.map((r) => r.timeout_s)).toEqual([60, 60]);
    expect(state.timeoutS).toBe(60);
    expect(log.filter((l) => l === "changed")).toEqual(["changed"]); // saved once
  });

  it("sends no limit of its own by default", async () => {
    const { run, sent } = runner(structuredClone(DEFAULT_STATE));
    await run.run();
    expect(sent[0]!.timeout_s).toBeUndefined();
  });

  it("runs on the ticked versions in across mode", async () => {
    const { run, log, sent } = runner(structuredClone(DEFAULT_STATE), true);
    await run.run();
    expect(log).toEqual(["follow", "clear errors", "across run"]);
    expect(sent).toEqual([]);
  });
});

describe("gpuChoices", () => {
  it("lists the offered targets, and keeps a link's target the server does not offer", () => {
    expect(gpuChoices("", ["sm_90"])).toEqual([{ value: "sm_90", label: "GPU sm_90 (no GPU needed)" }]);
    expect(gpuChoices("sm_80", ["sm_90"]).map((c) => c.label)).toEqual(["GPU sm_90 (no GPU needed)", "GPU sm_80 (not offered here)"]);
    expect(gpuChoices("", [])).toEqual([]);
  });
});
