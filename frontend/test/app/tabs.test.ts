// The tab choice: outputs first, the user's pick kept, never an empty Errors tab.
import { describe, expect, it } from "vitest";
import { TabChoice, TabMarks } from "../../src/app/tabs";
import { GROUPS, GROUP_TITLES, OPENS_ITSELF, TABS, groupOf, hashFor, tabFromHash } from "../../src/model/tabtable";

describe("the tab table", () => {
  it("groups the outputs as users think of them, each group in one run of tabs", () => {
    expect(GROUPS.map((g) => g.id)).toEqual(["ir", "values", "how", "cost", "errors"]);
    expect(GROUPS.map((g) => g.tabs)).toEqual([
      ["jaxpr", "stablehlo", "hlo", "asm", "graph"],
      ["value", "trace_values", "numerics", "checks", "console"],
      ["autodiff", "sharding", "passes", "kernels", "remarks", "recompiles", "export"],
      ["cost", "timing", "memory", "profile"],
      ["errors"],
    ]);
    expect(GROUPS.flatMap((g) => g.tabs)).toEqual(TABS.map((t) => t.id)); // every tab once
    expect(Object.keys(GROUP_TITLES).sort()).toEqual(GROUPS.map((g) => g.id).sort());
    expect(groupOf("kernels")).toBe("how");
    expect(OPENS_ITSELF).toEqual(["jaxpr", "stablehlo", "hlo", "value", "checks", "cost", "timing"]);
  });

  it("reads the tab a link names from its address, and nothing else", () => {
    expect(tabFromHash(hashFor("autodiff"))).toBe("autodiff");
    expect(tabFromHash("#x=1&out=profile")).toBe("profile");
    expect(tabFromHash("#out=nosuchtab")).toBeNull();
    expect(tabFromHash("#out=constructor")).toBeNull();
    expect(tabFromHash("")).toBeNull();
  });
});

describe("TabChoice", () => {
  it("shows the first output of a run when nothing was picked", () => {
    const c = new TabChoice();
    c.runStarts();
    expect(c.outputArrived("value")).toBe("value");
    c.active = "value";
    expect(c.outputArrived("jaxpr")).toBeNull(); // only the first
  });

  it("selects nothing when the first output's tab is on show already (a select lays the page out)", () => {
    const c = new TabChoice(); // the jaxpr tab on show, nothing picked: the usual edit
    c.runStarts();
    expect(c.outputArrived("jaxpr")).toBeNull();
    expect(c.firstOutput).toBe("jaxpr");
    const d = new TabChoice();
    d.active = d.pick("hlo");
    d.active = "errors"; // a failed run showed Errors; the next run's HLO goes back to it
    d.runStarts();
    expect(d.outputArrived("jaxpr")).toBe("hlo");
  });

  it("keeps the tab the user picked", () => {
    const c = new TabChoice();
    c.active = c.pick("hlo");
    c.runStarts();
    expect(c.outputArrived("jaxpr")).toBeNull();
  });

  it("goes back from Errors to the picked tab when a run starts, and to the outputs after a clean run", () => {
    const c = new TabChoice();
    c.active = c.pick("cost");
    c.active = "errors"; // a run failed: Errors shown, the pick kept
    expect(c.runStarts()).toBe("cost");
    c.active = c.pick("errors"); // Errors picked by hand is never remembered as the pick
    expect(c.picked).toBeNull();
    const d = new TabChoice();
    d.active = "errors";
    d.runStarts();
    expect(d.outputArrived("jaxpr")).toBe("jaxpr");
    d.active = "errors";
    expect(d.runEndedClean()).toBe("jaxpr");
  });

  it("never opens an opt-in tab by itself", () => {
    const c = new TabChoice();
    c.runStarts();
    expect(c.outputArrived("passes")).toBeNull();
    expect(c.outputArrived("graph")).toBeNull();
  });
});

describe("TabMarks", () => {
  it("writes the marks once after the paint, however many events asked, the last badge kept", () => {
    const later: (() => void)[] = [];
    const written: [string, string | undefined][] = [];
    const m = new TabMarks((id, badge) => written.push([id, badge]), (w) => later.push(w));
    m.mark("stablehlo");
    m.mark("hlo");
    m.mark("errors", "1");
    m.mark("errors"); // no new badge: the one asked for stays
    m.mark("hlo");
    expect(written).toEqual([]); // nothing in the frame that shows the jaxpr
    expect(later).toHaveLength(1);
    later.shift()!();
    expect(written).toEqual([
      ["stablehlo", undefined],
      ["hlo", undefined],
      ["errors", "1"],
    ]);
    m.mark("console", "");
    m.flush(); // a run starts: written at once
    expect(written.at(-1)).toEqual(["console", ""]);
    later.shift()!(); // the later write finds nothing left
    expect(written).toHaveLength(4);
  });
});

describe("TabMarks across runs", () => {
  it("leaves the dots at a run's start and names at its end the tabs that got no output in it", () => {
    const later: (() => void)[] = [];
    const written: [string, string | undefined][] = [];
    const m = new TabMarks((id, badge) => written.push([id, badge]), (w) => later.push(w));
    m.mark("stablehlo");
    m.mark("cost");
    m.runStarts(); // the last run's marks written now; nothing else
    expect(written).toEqual([
      ["stablehlo", undefined],
      ["cost", undefined],
    ]);
    m.mark("stablehlo"); // this run's output: the same tab
    m.mark("errors", "1");
    expect(m.runEnds(["jaxpr", "stablehlo", "cost", "errors"])).toEqual(["jaxpr", "cost"]);
    expect(written.slice(2)).toEqual([
      ["stablehlo", undefined],
      ["errors", "1"],
    ]); // written at the end, not left for after the paint
    later.splice(0).forEach((w) => w());
    expect(written).toHaveLength(4);
  });
});
