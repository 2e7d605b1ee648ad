// The Profile pane's parts that need no DOM: shares, the timeline's layout, the
// trace's bytes, and Perfetto's PING/PONG handshake.
import { gunzipSync, gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { parseEvent } from "../src/connection/protocol";
import { fmtRate, handToPerfetto, openWithoutOpener, passTimeIndex, passTimeKey, PERFETTO_ORIGIN, shares, timelineBars, traceBytes, type ProfileEvent } from "../src/panes/profile";

const row = (name: string, total_us: number, line: number | null = 3) => ({
  name, opcode: "fusion", calls: 2, total_us, hlo_line: 10, line, flops: 100, bytes: 40,
  flops_per_s: 1e9, bytes_per_s: 4e8, bound: "memory",
});
const trace = gzipSync(JSON.stringify({ traceEvents: [{ ph: "X", name: "dot", ts: 0, dur: 3 }] }));

function profile(): ProfileEvent {
  const parsed = parseEvent({
    type: "profile", calls: 2, wall_us: 40,
    rows: [row("dot", 30), row("add_fusion", 10, null)],
    timeline: [
      { name: "dot", start_us: 0, dur_us: 15 },
      { name: "add_fusion", start_us: 15, dur_us: 5 },
      { name: "dot", start_us: 20, dur_us: 15 },
      { name: "add_fusion", start_us: 35, dur_us: 5 },
    ],
    trace_gz: trace.toString("base64"),
    passes: [{ pipeline: "simplification", pass: "algsimp", calls: 2, total_us: 120 }],
    peaks: { device_kind: "cpu", flops_per_s: 2e10, bytes_per_s: 5e9, source: "measured" },
  });
  if (!parsed.ok) throw new Error(parsed.why);
  return parsed.event as ProfileEvent;
}

describe("the profile pane", () => {
  it("parses a profile event as the engine writes it", () => {
    const ev = profile();
    expect(ev.rows[0]!.name).toBe("dot");
    expect(ev.passes![0]!.pass).toBe("algsimp");
  });

  it("gives each instruction its share of the time", () => {
    expect(shares(profile().rows)).toEqual([0.75, 0.25]);
    expect(shares([])).toEqual([]);
  });

  it("lays the timeline out over the events' span, one lane per instruction", () => {
    const { lanes, bars } = timelineBars(profile(), 400);
    expect(lanes).toEqual(["dot", "add_fusion"]);
    expect(bars.map((b) => b.lane)).toEqual([0, 1, 0, 1]);
    expect(bars[0]).toMatchObject({ x: 0, width: 150 });
    expect(bars[3]!.x + bars[3]!.width).toBeCloseTo(400);
  });

  it("hands back the trace's gzip bytes unchanged", () => {
    const bytes = traceBytes(profile().trace_gz!);
    expect(JSON.parse(gunzipSync(bytes).toString()).traceEvents[0].name).toBe("dot");
  });

  it("formats rates with their unit", () => {
    expect(fmtRate(2.5e9, "FLOP")).toBe("2.50 GFLOP/s");
    expect(fmtRate(null, "B")).toBe("—");
  });

  it("posts the trace to Perfetto only after its PONG, from its origin", () => {
    const posted: [unknown, string][] = [];
    const listeners: ((e: { data: unknown; origin: string }) => void)[] = [];
    let tick: (() => void) | null = null;
    let stopped = false;
    const buffer = new ArrayBuffer(4);
    handToPerfetto(
      { postMessage: (m, o) => posted.push([m, o]) },
      { addEventListener: (_t, fn) => listeners.push(fn), removeEventListener: (_t, fn) => listeners.splice(listeners.indexOf(fn), 1) },
      buffer,
      "t",
      { every: (fn) => (tick = fn), stop: () => (stopped = true) },
    );
    tick!();
    expect(posted).toEqual([["PING", PERFETTO_ORIGIN]]);
    listeners[0]!({ data: "PONG", origin: "https://evil.example" });
    expect(posted).toHaveLength(1);
    listeners[0]!({ data: "PONG", origin: PERFETTO_ORIGIN });
    expect(stopped).toBe(true);
    expect(listeners).toHaveLength(0);
    expect(posted[1]).toEqual([{ perfetto: { buffer, title: "t", fileName: "jaxplay-trace.json" } }, PERFETTO_ORIGIN]);
  });
});

describe("the Perfetto tab", () => {
  it("is opened without window.opener, and this page keeps its handle", () => {
    const tab = { opener: {} as unknown, location: { href: "" } };
    const opened: string[][] = [];
    const self = {
      open: (url?: string | URL, target?: string) => {
        opened.push([String(url), String(target)]);
        return tab as unknown as Window;
      },
    };
    expect(openWithoutOpener(self, PERFETTO_ORIGIN)).toBe(tab);
    expect(opened).toEqual([["about:blank", "_blank"]]);
    expect(tab.opener).toBeNull();
    expect(tab.location.href).toBe(PERFETTO_ORIGIN);
    expect(openWithoutOpener({ open: () => null }, PERFETTO_ORIGIN)).toBeNull();
  });
});

describe("pass times on the Passes tab", () => {
  it("keys the profile's passes as XLA's dump names its pipelines", () => {
    const index = passTimeIndex([
      { pipeline: "HLO passes through layout assignment", pass: "layout-assignment", calls: 1, total_us: 13677.9 },
      { pipeline: "simplification", pass: "algsimp", calls: 3, total_us: 392.3 },
    ]);
    expect(index.get(passTimeKey("HLO_passes_through_layout_assignment", "layout-assignment"))).toBe(13677.9);
    expect(index.get(passTimeKey("simplification", "algsimp"))).toBe(392.3);
    expect(index.get(passTimeKey("simplification", "dce"))).toBeUndefined();
    expect(passTimeIndex(null).size).toBe(0);
  });
});

describe("the timeline's labels", () => {
  it("fit the label column, cut in the middle, never clipped", async () => {
    const { fitLabel, LABEL_CHARS } = await import("../src/panes/profile");
    expect(fitLabel("dot")).toBe("dot");
    const long = "multiply_multiply_fusion.12";
    const cut = fitLabel(long);
    expect(cut.length).toBe(LABEL_CHARS);
    expect(cut.startsWith("multiply")).toBe(true);
    expect(cut.endsWith("fusion.12")).toBe(true);
    expect(cut).toContain("…");
  });
});
