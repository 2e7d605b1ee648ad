// An IR pane across runs (issue 26): the last run's text stays on show, stale, until
// the new run's replaces it; the view changed only where the texts differ.
import { describe, expect, it } from "vitest";
import { IrTexts, minimalChange } from "../src/panes/ir_texts";

const out = (text: string, lines: [number, number][] = []) => ({ text, sources: new Map(lines) });

describe("IrTexts", () => {
  it("keeps the last run's text on show, stale, until the new run's comes", () => {
    const t = new IrTexts();
    expect(t.reset(["main"])).toBe(false); // the first run: nothing to keep, nothing to redraw
    t.set("main", out("{ lambda ; a:f32[]. let b = sin a in (b,) }", [[1, 4]]));
    t.end();
    expect(t.reset(["main"])).toBe(false); // same pipelines: the text stays
    expect(t.isStale()).toBe(true);
    expect(t.shown("main")?.text).toContain("sin a");
    expect(t.has("main")).toBe(false); // not this run's
    expect(t.text("main")).toBeUndefined();
    expect(t.missing()).toEqual([]); // nothing to wait for on screen
    expect([...t.codeLines()]).toEqual([4]); // the bands follow the text on show
    t.set("main", out("{ lambda ; a:f32[]. let b = cos a in (b,) }", [[1, 5]]));
    expect(t.isStale()).toBe(false);
    expect(t.has("main")).toBe(true);
    expect(t.text("main")).toContain("cos a");
    expect([...t.codeLines()]).toEqual([5]);
    expect(t.end()).toBe(false); // nothing stale left to drop
  });

  it("drops a stale text the run ended without (the pane then says the run ended first)", () => {
    const t = new IrTexts();
    t.reset(["main"]);
    t.set("main", out("old"));
    t.end();
    t.reset(["main"]);
    expect(t.end()).toBe(true); // redraw: the old text goes
    expect(t.shown("main")).toBeUndefined();
    expect(t.missing()).toEqual(["main"]);
    expect(t.ended).toBe(true);
    expect(t.isStale()).toBe(false);
    t.reset(["main"]); // and a run after it has nothing stale to show
    expect(t.isStale()).toBe(false);
  });

  it("redraws at once when the pipelines change (compare on or off): old texts do not fit", () => {
    const t = new IrTexts();
    t.reset(["main"]);
    t.set("main", out("a"));
    expect(t.reset(["main", "0"])).toBe(true);
    expect(t.shown("main")).toBeUndefined();
    expect(t.missing()).toEqual(["main", "0"]);
    t.set("main", out("a2"));
    t.set("0", out("b2"));
    expect(t.reset(["main", "0"])).toBe(false);
    t.set("main", out("a3")); // A's came, B's not yet: still stale
    expect(t.isStale()).toBe(true);
    expect(t.shown("0")?.text).toBe("b2");
    t.set("0", out("b3"));
    expect(t.isStale()).toBe(false);
  });
});

describe("minimalChange", () => {
  const apply = (from: string, c: ReturnType<typeof minimalChange>) => (c === null ? from : from.slice(0, c.from) + c.insert + from.slice(c.to));

  it("is nothing for the same text, and only the part that differs otherwise", () => {
    expect(minimalChange("let b = sin a", "let b = sin a")).toBeNull();
    expect(minimalChange("a\nb = sin a\nc", "a\nb = cos a\nc")).toEqual({ from: 6, to: 9, insert: "cos" });
  });

  it("turns one text into the other whatever they share", () => {
    const cases: [string, string][] = [
      ["", "abc"],
      ["abc", ""],
      ["aaa", "aa"],
      ["aa", "aaa"],
      ["abcabc", "abc"],
      ["x\ny\nz", "x\nq\ny\nz"],
      ["{ lambda ; a. let b = mul a 2.0 in (b,) }", "{ lambda ; a. let b = mul a 1.001; c = mul b 2.0 in (c,) }"],
    ];
    for (const [a, b] of cases) expect(apply(a, minimalChange(a, b))).toBe(b);
  });
});
