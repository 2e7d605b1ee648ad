// The memory timeline's geometry (the stacked bands, XLA's peak), and the hook by which
// the Memory, Profile, Asm and Kernels panes give the editor the lines their hover
// links (OutputPane.codeLines: editor/linking.ts lights banded lines only).
import { describe, expect, it } from "vitest";
import { LazyPane } from "../src/panes/lazy";
import { PaneScheduler } from "../src/panes/render";
import { kernelLines, type PallasKernel } from "../src/panes/kernel-grid";
import { bandOf } from "../src/editor/linking";
import { parseEvent, type EventOf } from "../src/connection/protocol";
import { asmLines } from "../src/panes/asm";
import { bandClass, bandShapes, peakX, timelineLines, type MemoryTimeline } from "../src/panes/memory_timeline";
import { profileLines, type ProfileEvent } from "../src/panes/profile";
import { FakePane } from "./app/fakes";

function memoryEvent(timeline: MemoryTimeline): EventOf<"memory"> {
  const parsed = parseEvent({ type: "memory", pipeline: "main", peak_bytes: 10, buffers: [], timeline });
  if (!parsed.ok) throw new Error(parsed.why);
  return parsed.event as EventOf<"memory">;
}

const TIMELINE: MemoryTimeline = {
  steps: 4,
  stride: 1,
  points: [100, 300, 400, 200],
  bands: [
    { line: null, label: "argument", points: [100, 100, 100, 100] },
    { line: 5, label: "line 5", points: [0, 200, 200, 0] },
    { line: 6, label: "line 6", points: [0, 0, 100, 100] },
  ],
  peak_step: 2,
  peak_bytes: 400,
  peak_instruction: "dot",
  peak_line: 6,
  at_peak: [
    { name: "dot", bytes: 200, line: 5, kind: "temp" },
    { name: "x.1", bytes: 100, line: null, kind: "argument" },
  ],
};

/** The y of each vertex of a path's top edge (its first half). */
function topEdge(d: string, n: number): number[] {
  const points = d.slice(1, -1).split("L").map((p) => Number(p.split(",")[1]));
  return points.slice(0, n);
}

describe("the memory timeline", () => {
  it("is a valid memory event's timeline", () => {
    expect(memoryEvent(TIMELINE).timeline?.peak_step).toBe(2);
  });

  it("stacks the bands so the top one's edge is the bytes live at each point", () => {
    const shapes = bandShapes(TIMELINE, 300, 110, 10);
    expect(shapes.map((s) => s.line)).toEqual([null, 5, 6]);
    // the highest point (400 bytes) touches the top; 0 bytes is the bottom (110)
    const y = (bytes: number): number => 110 - (100 * bytes) / 400;
    expect(topEdge(shapes[2].d, 4)).toEqual(TIMELINE.points.map((p) => Number(y(p).toFixed(1))));
    expect(topEdge(shapes[0].d, 4)).toEqual([85, 85, 85, 85]);
  });

  it("marks XLA's peak at its step, a long schedule's at its stride's point", () => {
    expect(peakX(TIMELINE, 300)).toBe(200);
    const long = { ...TIMELINE, steps: 40, stride: 10, peak_step: 25 };
    expect(peakX(long, 300)).toBe(200);
  });

  it("colours a band as its line is banded in the editor", () => {
    expect(bandClass(6)).toBe(`mem-band band-${bandOf(6)}`);
    expect(bandClass(null)).toContain("mem-band-none");
  });

  it("links the bands', the peak values' and the peak instruction's lines", () => {
    expect(new Set(timelineLines(TIMELINE))).toEqual(new Set([5, 6]));
  });
});

describe("panes give the editor the lines their hover links", () => {
  it("Profile: its instructions' lines", () => {
    const row = (line: number | null) => ({ name: "f", opcode: "fusion", calls: 1, total_us: 1, hlo_line: 3, line, flops: null, bytes: null, flops_per_s: null, bytes_per_s: null, bound: null });
    const ev = { rows: [row(4), row(null), row(9)] } as unknown as ProfileEvent;
    expect(profileLines([ev])).toEqual(new Set([4, 9]));
  });

  it("Asm: each kernel's lines", () => {
    const ev = { kernels: [{ lines: [3, 5] }, { lines: [] }, { lines: [7] }] } as unknown as EventOf<"asm">;
    expect(asmLines([ev])).toEqual(new Set([3, 5, 7]));
  });

  it("Kernels: each pallas_call's line and its texts' lines", () => {
    const k = { line: 12, jaxpr_sources: [{ out_line: 1, line: 13 }], mosaic_sources: [{ out_line: 4, line: 14 }], triton_sources: null } as unknown as PallasKernel;
    expect(kernelLines([k])).toEqual(new Set([12, 13, 14]));
  });

  it("a lazy pane gives its pane's lines once loaded, and the scheduler finds a tab's panes", async () => {
    class LinkedPane extends FakePane {
      codeLines(): Set<number> {
        return new Set([8]);
      }
    }
    const lazy = new LazyPane(["memory"], async () => new LinkedPane(["memory"]));
    expect(lazy.codeLines()).toEqual(new Set());
    await lazy.ready();
    expect(lazy.codeLines()).toEqual(new Set([8]));
    const scheduler = new PaneScheduler([{ tab: "memory", pane: lazy }, { tab: "asm", pane: new FakePane(["asm"]) }], () => "memory");
    expect(scheduler.entries("memory").map((e) => e.pane)).toEqual([lazy]);
  });
});
