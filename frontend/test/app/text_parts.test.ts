// A big IR text's event and its text_part events joined back into one whole event
// (connection/text-parts.ts), as the engine splits them (sandbox/engine/core/text_parts.py).
import { describe, expect, it } from "vitest";
import { TextParts } from "../../src/connection/text-parts";
import type { RunEvent } from "../../src/connection/protocol";

const head = (pipeline = "main"): RunEvent =>
  ({
    type: "hlo",
    pipeline,
    text: "line1\nline2\n… (12 more characters follow in 2 text_part events)\n",
    sources: [{ out_line: 1, line: 3 }, { out_line: 2, line: 4 }],
    parts: 2,
    shown_chars: 12,
    full_chars: 24,
  }) as RunEvent;
const part = (n: number, text: string, outLine: number, pipeline = "main"): RunEvent =>
  ({ type: "text_part", pipeline, output: "hlo", part: n, text, sources: [{ out_line: outLine, line: 5 }] }) as RunEvent;

describe("TextParts", () => {
  it("holds the parts and hands on one whole event after the last", () => {
    const j = new TextParts();
    expect(j.accept(head())).toEqual([]);
    expect(j.accept(part(1, "line3\n", 3))).toEqual([]);
    const out = j.accept(part(2, "line4\n", 4));
    expect(out).toHaveLength(1);
    const whole = out[0] as Extract<RunEvent, { type: "hlo" }>;
    expect(whole.text).toBe("line1\nline2\nline3\nline4\n");
    expect(whole.sources?.map((s) => s.out_line)).toEqual([1, 2, 3, 4]);
    expect(whole.parts).toBeNull();
  });

  it("passes events without parts through untouched", () => {
    const j = new TextParts();
    const e = { type: "jaxpr", text: "{ lambda ; }", sources: [] } as unknown as RunEvent;
    expect(j.accept(e)).toEqual([e]);
  });

  it("keeps two pipelines' parts apart and ignores a part out of order", () => {
    const j = new TextParts();
    j.accept(head("main"));
    j.accept(head("0"));
    expect(j.accept(part(2, "x\n", 3, "main"))).toEqual([]); // part 1 not seen yet
    j.accept(part(1, "a\n", 3, "0"));
    const out = j.accept(part(2, "b\n", 4, "0"));
    expect((out[0] as { text: string }).text).toBe("line1\nline2\na\nb\n");
  });

  it("shows what came when the run ends before the last part, saying so", () => {
    const j = new TextParts();
    j.accept(head());
    j.accept(part(1, "line3\n", 3));
    const done = { type: "done", status: "timeout", ms: 1 } as unknown as RunEvent;
    const out = j.accept(done);
    expect(out.map((e) => e.type)).toEqual(["hlo", "done"]);
    expect((out[0] as { text: string }).text).toContain("line3\n\n… the run ended after 1 of 2 parts");
  });

  it("forgets an unfinished text when a new run starts", () => {
    const j = new TextParts();
    j.accept(head());
    j.reset();
    expect(j.accept(part(1, "line3\n", 3))).toEqual([]);
    const done = { type: "done", status: "ok", ms: 1 } as unknown as RunEvent;
    expect(j.accept(done)).toEqual([done]);
  });
});
