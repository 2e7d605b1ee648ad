// The memory timeline (issue 36): the bytes live at each step of XLA's schedule as a
// stacked area chart, one band per code line (coloured as its line is in the editor;
// hover a band: its line lights up), XLA's peak marked, and the values live there.
// The geometry is pure (tested in test/memory_timeline.test.ts); drawTimeline adds
// the SVG and the hover.
import { h, svg } from "../util/dom";
import { fmtBytes } from "../util/format";
import { bandOf } from "../editor/linking";
import type { EventOf } from "../connection/protocol";

export type MemoryTimeline = NonNullable<EventOf<"memory">["timeline"]>;

const W = 600;
const H = 160;
const TOP = 18;

export interface BandShape {
  line: number | null;
  label: string;
  /** the SVG path of the band: its top edge left to right, its bottom right to left */
  d: string;
}

/** Each band's area, stacked in the event's order (the first at the bottom), over a
 * chart `width` × `height` whose top is the highest point. */
export function bandShapes(t: MemoryTimeline, width = W, height = H, top = TOP): BandShape[] {
  const n = t.points.length;
  const highest = Math.max(1, ...t.points);
  const x = (i: number): number => (n <= 1 ? 0 : (i * width) / (n - 1));
  const y = (bytes: number): number => height - ((height - top) * bytes) / highest;
  const base = new Array<number>(n).fill(0);
  return t.bands.map((band) => {
    const lower = [...base];
    band.points.forEach((b, i) => (base[i] += b));
    const upper = [...base];
    const edge = upper.map((b, i) => `${x(i).toFixed(1)},${y(b).toFixed(1)}`);
    const back = lower.map((b, i) => `${x(i).toFixed(1)},${y(b).toFixed(1)}`).reverse();
    return { line: band.line ?? null, label: band.label, d: `M${edge.join("L")}L${back.join("L")}Z` };
  });
}

/** The x of XLA's peak step on the chart. */
export function peakX(t: MemoryTimeline, width = W): number {
  const n = t.points.length;
  const i = Math.min(n - 1, Math.floor(t.peak_step / Math.max(1, t.stride)));
  return n <= 1 ? 0 : (i * width) / (n - 1);
}

/** The class of a band: its code line's colour, or grey for one without a line. */
export function bandClass(line: number | null): string {
  return line == null ? "mem-band mem-band-none" : `mem-band band-${bandOf(line)}`;
}

/** The timeline's figure: the chart, its legend, XLA's peak and the values live there. */
export function drawTimeline(t: MemoryTimeline, onLine: (codeLine: number | null) => void): HTMLElement {
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H + 14}`, width: "100%", role: "img", class: "chart memory-timeline", "aria-label": "memory timeline", "data-testid": "memory-timeline" });
  const stride = t.stride > 1 ? `, ${t.stride} steps per point (each its busiest)` : "";
  chart.append(svg("text", { x: 0, y: 12, class: "chart-title" }, `bytes live over XLA's schedule: ${t.steps} steps${stride}`));
  for (const band of bandShapes(t)) {
    const path = svg("path", { d: band.d, class: bandClass(band.line), "data-line": band.line ?? "" }, svg("title", {}, band.label));
    path.addEventListener("mouseenter", () => onLine(band.line));
    path.addEventListener("mouseleave", () => onLine(null));
    chart.append(path);
  }
  // the scale: the highest point's bytes at the top, 0 at the bottom
  chart.append(svg("line", { x1: 0, x2: W, y1: TOP, y2: TOP, class: "mem-top-mark" }));
  chart.append(svg("text", { x: W, y: TOP - 3, class: "chart-label", "text-anchor": "end" }, `${fmtBytes(Math.max(0, ...t.points))} (highest)`));
  const px = peakX(t);
  chart.append(svg("line", { x1: px, x2: px, y1: TOP - 4, y2: H, class: "mem-peak-mark" }));
  chart.append(svg("text", { x: Math.min(px, W - 140), y: H + 12, class: "chart-label" }, `peak: step ${t.peak_step}`));
  const legend = h(
    "p",
    { class: "memory-legend" },
    ...t.bands.map((b) => {
      const item = h("span", { class: `${bandClass(b.line ?? null)} mem-legend-item`, "data-line": b.line ?? "" }, b.label);
      item.addEventListener("mouseenter", () => onLine(b.line ?? null));
      item.addEventListener("mouseleave", () => onLine(null));
      return item;
    }),
  );
  const at = t.peak_instruction ? ` at ${t.peak_instruction}${t.peak_line != null ? ` (line ${t.peak_line})` : ""}` : "";
  const heading = h("p", { class: "memory-peak" }, "XLA's peak: step ", h("strong", { "data-testid": "memory-peak-step" }, String(t.peak_step)), at, ", ", h("strong", { "data-testid": "memory-timeline-peak", "data-bytes": t.peak_bytes, title: `${t.peak_bytes.toLocaleString("en")} bytes` }, fmtBytes(t.peak_bytes)), " live");
  const rows = t.at_peak.map((v) => {
    const tr = h("tr", { class: `mem-${v.kind}`, "data-bytes": v.bytes }, h("td", { class: "num" }, fmtBytes(v.bytes)), h("td", {}, v.kind), h("td", { class: "mono" }, v.name), h("td", { class: "num" }, v.line != null ? String(v.line) : "—"));
    tr.addEventListener("mouseenter", () => onLine(v.line ?? null));
    tr.addEventListener("mouseleave", () => onLine(null));
    return tr;
  });
  const table = h("table", { class: "memory memory-at-peak" }, h("thead", {}, h("tr", {}, ...["bytes", "kind", "HLO value", "line"].map((c) => h("th", {}, c)))), h("tbody", {}, ...rows));
  return h("div", { class: "memory-timeline-box" }, h("figure", { class: "memory-timeline-figure" }, chart, legend), h("div", { class: "memory-at-peak-box" }, heading, table));
}

/** The code lines the timeline links: its bands' and the values' live at the peak. */
export function timelineLines(t: MemoryTimeline): number[] {
  return [...t.bands.map((b) => b.line), ...t.at_peak.map((v) => v.line), t.peak_line].filter((l): l is number => l != null);
}
