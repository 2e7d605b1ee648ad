// A pane loaded on first use (panes/lazy.ts): what it is given before its chunk arrives
// is rendered once it has, in order; it loads once; a pane that takes other events
// than it was declared with is refused.
import { describe, expect, it } from "vitest";
import { LazyPane } from "../../src/panes/lazy";
import { parseEvent, type RunEvent } from "../../src/connection/protocol";
import { FakePane } from "./fakes";

const ev = (raw: unknown): RunEvent => {
  const p = parseEvent(raw);
  if (!p.ok) throw new Error(p.why);
  return p.event;
};

function deferred() {
  let loads = 0;
  let resolve: (p: FakePane) => void = () => {};
  const arrived = new Promise<FakePane>((r) => (resolve = r));
  const load = (): Promise<FakePane> => {
    loads++;
    return arrived;
  };
  return { load, resolve, loads: () => loads };
}

describe("LazyPane", () => {
  it("holds what it is given until the pane is loaded, then renders it in order", async () => {
    const chunk = deferred();
    const lazy = new LazyPane(["value"], chunk.load);
    expect(chunk.loads()).toBe(0); // nothing loaded until needed
    lazy.reset(["main"], {});
    lazy.show(ev({ type: "value", repr: "Array(2., dtype=float32)", tree: [] }), "main");
    lazy.end();
    expect(lazy.get()).toBeNull();
    const pane = new FakePane(["value"]);
    chunk.resolve(pane);
    expect(await lazy.ready()).toBe(pane);
    expect(pane.log).toEqual(["reset main", "show value main", "end"]);
    lazy.reset(["main", "b"], {}); // loaded: straight through
    expect(pane.log.at(-1)).toBe("reset main,b");
    expect(chunk.loads()).toBe(1);
  });

  it("says it drew late once what it held is drawn, and not when it held nothing", async () => {
    const chunk = deferred();
    const lazy = new LazyPane(["value"], chunk.load);
    const pane = new FakePane(["value"]);
    const said: string[] = [];
    lazy.onLoaded = () => said.push(pane.log.join("|"));
    lazy.reset(["main"], {});
    lazy.show(ev({ type: "value", repr: "Array(2., dtype=float32)", tree: [] }), "main");
    expect(said).toEqual([]);
    chunk.resolve(pane);
    await lazy.ready();
    expect(said).toEqual(["reset main|show value main"]); // after the held calls, once
    lazy.end(); // loaded: drawn in the scheduler's own render, nothing late
    expect(said).toHaveLength(1);

    const idle = new LazyPane(["value"], async () => new FakePane(["value"]));
    let late = 0;
    idle.onLoaded = () => late++;
    await idle.ready(); // loaded ahead (when idle): nothing was held
    expect(late).toBe(0);
  });

  it("refuses a pane that takes other events than it was declared with", async () => {
    const lazy = new LazyPane(["stdout"], async () => new FakePane(["stdout", "stderr"]));
    await expect(lazy.ready()).rejects.toThrow(/declared stdout/);
  });
});
