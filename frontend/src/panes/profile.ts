// Profile: where the compiled program's time goes, per executed HLO instruction
// (sandbox/engine/outputs/profile/): a table joined to the HLO and code lines, a roofline
// column against the worker's peaks, a kernel timeline, the compile's slowest passes,
// and the trace itself, to download or to open in Perfetto (ui.perfetto.dev, handed
// over by window.postMessage: https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui).
import { clear, h, svg } from "../util/dom";
import type { EventOf } from "../connection/protocol";
import { PerPipelinePane } from "./pane";

export type ProfileEvent = EventOf<"profile">;
export type ProfileRow = ProfileEvent["rows"][number];

export const PERFETTO_ORIGIN = "https://ui.perfetto.dev";
const W = 680;
const LABEL_W = 170;
const LANE_H = 14;
const MAX_LANES = 16;

/** Each row's share of the instructions' total time (0..1), in the event's order. */
export function shares(rows: readonly ProfileRow[]): number[] {
  const total = rows.reduce((s, r) => s + r.total_us, 0);
  return rows.map((r) => (total > 0 ? r.total_us / total : 0));
}

export function fmtRate(v: number | string | null | undefined, unit: string): string {
  if (typeof v !== "number") return "—";
  const steps: [number, string][] = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [f, p] of steps) if (v >= f) return `${(v / f).toFixed(2)} ${p}${unit}/s`;
  return `${v.toFixed(0)} ${unit}/s`;
}

export interface Bar {
  lane: number;
  name: string;
  x: number;
  width: number;
}

/** The timeline's bars: one lane per instruction (the slowest MAX_LANES; the rest in
 * one last lane), x and width in pixels of `plotW` over the events' span. */
export function timelineBars(ev: ProfileEvent, plotW: number): { lanes: string[]; bars: Bar[] } {
  const lanes = ev.rows.slice(0, MAX_LANES).map((r) => r.name);
  const lane = new Map(lanes.map((n, i) => [n, i]));
  const end = Math.max(0, ...ev.timeline.map((e) => e.start_us + e.dur_us));
  if (ev.rows.length > MAX_LANES) lanes.push("(others)");
  const scale = end > 0 ? plotW / end : 0;
  const bars = ev.timeline.map((e) => ({
    lane: lane.get(e.name) ?? MAX_LANES,
    name: e.name,
    x: e.start_us * scale,
    width: Math.max(0.5, e.dur_us * scale),
  }));
  return { lanes, bars };
}

/** The compile's pass times keyed as the Passes tab names its items: XLA's dump spells a
 * pipeline's spaces as underscores (`HLO_passes_through_layout_assignment`). A time is
 * every run of that pass in that pipeline, together. */
export function passTimeIndex(passes: ProfileEvent["passes"]): Map<string, number> {
  const index = new Map<string, number>();
  for (const p of passes ?? []) index.set(passTimeKey(p.pipeline, p.pass), p.total_us);
  return index;
}

export function passTimeKey(pipeline: string, pass: string): string {
  return `${pipeline.replace(/ /g, "_")}\u0000${pass}`;
}

/** The trace's bytes (gzipped Chrome trace JSON) from the event's base64. */
export function traceBytes(b64: string): Uint8Array {
  const raw = atob(b64);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** The trace as plain JSON bytes (Perfetto reads both; plain is the safe one). */
async function gunzip(bytes: Uint8Array): Promise<ArrayBuffer> {
  if (typeof DecompressionStream === "undefined") return bytes.slice().buffer;
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).arrayBuffer();
}

export interface PostTarget {
  postMessage(message: unknown, targetOrigin: string): void;
}
export interface Messages {
  addEventListener(type: "message", fn: (e: { data: unknown; origin: string }) => void): void;
  removeEventListener(type: "message", fn: (e: { data: unknown; origin: string }) => void): void;
}

/** Perfetto's documented handshake: PING the opened tab until it answers PONG, then
 * post the trace. Gives up after `tries` pings. Returns a function that stops it. */
export function handToPerfetto(
  target: PostTarget,
  self: Messages,
  buffer: ArrayBuffer,
  title: string,
  timers: { every: (fn: () => void, ms: number) => unknown; stop: (t: unknown) => void } = {
    every: (fn, ms) => setInterval(fn, ms),
    stop: (t) => clearInterval(t as ReturnType<typeof setInterval>),
  },
  tries = 200,
): () => void {
  let pings = 0;
  const onMessage = (e: { data: unknown; origin: string }): void => {
    if (e.origin !== PERFETTO_ORIGIN || e.data !== "PONG") return;
    done();
    target.postMessage({ perfetto: { buffer, title, fileName: "jaxplay-trace.json" } }, PERFETTO_ORIGIN);
  };
  const timer = timers.every(() => {
    if (++pings > tries) return done();
    target.postMessage("PING", PERFETTO_ORIGIN);
  }, 50);
  function done(): void {
    timers.stop(timer);
    self.removeEventListener("message", onMessage);
  }
  self.addEventListener("message", onMessage);
  return done;
}

/** Open ``url`` in a new tab that holds no ``window.opener`` (the other site can then
 * never navigate or script this page: reverse tabnabbing), while this page keeps the
 * tab's handle to post the trace to it. ``noopener`` would answer no handle at all,
 * so: a blank tab (this origin's), its opener cut, then sent to ``url``. Perfetto
 * answers our PING to the message's source, which needs no opener. */
export function openWithoutOpener(self: Pick<Window, "open">, url: string): Window | null {
  const win = self.open("about:blank", "_blank");
  if (!win) return null;
  win.opener = null;
  win.location.href = url;
  return win;
}

/** As many characters as the label column holds (12px monospace: 0.61em a character). */
export const LABEL_CHARS = Math.floor((LABEL_W - 8) / (12 * 0.61));

/** `name` cut to LABEL_CHARS in the middle (both ends tell fusions apart), with "…". */
export function fitLabel(name: string, chars = LABEL_CHARS): string {
  if (name.length <= chars) return name;
  const tail = Math.floor((chars - 1) / 2);
  return `${name.slice(0, chars - 1 - tail)}…${name.slice(name.length - tail)}`;
}

function timeline(ev: ProfileEvent, onLine: (line: number | null) => void): SVGElement | null {
  if (ev.timeline.length === 0) return null;
  const plotW = W - LABEL_W;
  const { lanes, bars } = timelineBars(ev, plotW);
  const lines = new Map(ev.rows.map((r) => [r.name, r.line ?? null]));
  const height = lanes.length * LANE_H + 24;
  const root = svg("svg", { viewBox: `0 0 ${W} ${height}`, width: "100%", role: "img", class: "chart profile-timeline", "aria-label": "kernel timeline" });
  const end = Math.max(...ev.timeline.map((e) => e.start_us + e.dur_us));
  root.append(svg("text", { x: 0, y: 12, class: "chart-title" }, `kernel timeline: ${ev.timeline.length} events over ${end.toFixed(1)} µs`));
  lanes.forEach((name, i) => {
    const text = svg("text", { x: LABEL_W - 6, y: 20 + i * LANE_H + LANE_H - 3, "text-anchor": "end", class: "chart-label" }, fitLabel(name));
    text.append(svg("title", {}, name)); // the full name on hover
    root.append(text);
  });
  for (const b of bars) {
    const rect = svg("rect", { x: (LABEL_W + b.x).toFixed(2), y: 20 + b.lane * LANE_H + 1, width: b.width.toFixed(2), height: LANE_H - 2, class: "bar-rect bar-a" });
    rect.append(svg("title", {}, b.name));
    rect.addEventListener("mouseenter", () => onLine(lines.get(b.name) ?? null));
    rect.addEventListener("mouseleave", () => onLine(null));
    root.append(rect);
  }
  return root;
}

/** The code lines the pane's hover links: its instructions' (table rows, timeline bars). */
export function profileLines(events: Iterable<ProfileEvent>): Set<number> {
  return new Set([...events].flatMap((e) => e.rows.flatMap((r) => (r.line != null ? [r.line] : []))));
}

export class ProfilePane extends PerPipelinePane<"profile"> {
  readonly consumes = ["profile"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number | null) => void,
  ) {
    super(root);
    this.render();
  }

  codeLines(): Set<number> {
    return profileLines(this.events.values());
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No profile in this run: Profile is off (turn it on under “What to compute”, or with the button above)." : "Waiting for the profile…"));
      return;
    }
    for (const p of this.pipelines) {
      const ev = this.events.get(p);
      if (ev) this.root.append(this.section(ev, this.pipelines.length > 1 ? (this.labels[p] ?? p) : null));
    }
  }

  private section(ev: ProfileEvent, title: string | null): HTMLElement {
    const total = ev.rows.reduce((s, r) => s + r.total_us, 0);
    const share = shares(ev.rows);
    const rows = ev.rows.map((r, i) => {
      const tr = h(
        "tr",
        { class: r.bound ? `bound-${r.bound}` : "" },
        h("td", { class: "mono" }, r.name),
        h("td", { class: "num" }, String(r.calls)),
        h("td", { class: "num" }, r.total_us.toFixed(1)),
        h("td", {}, h("span", { class: "mem-bar", style: `width:${(100 * (share[i] ?? 0)).toFixed(1)}%` })),
        h("td", { class: "num" }, String(r.hlo_line)),
        h("td", { class: "num" }, r.line != null ? String(r.line) : "—"),
        h("td", { class: "num" }, fmtRate(r.flops_per_s, "FLOP")),
        h("td", { class: "num" }, fmtRate(r.bytes_per_s, "B")),
        h("td", {}, r.bound ?? "—"),
      );
      tr.addEventListener("mouseenter", () => this.onLine(r.line ?? null));
      tr.addEventListener("mouseleave", () => this.onLine(null));
      return tr;
    });
    const head = ["instruction", "calls", "total µs", "", "HLO line", "line", "FLOP/s", "bytes/s", "bound"];
    const peaks = ev.peaks;
    const actions = h("p", { class: "profile-actions" });
    if (ev.trace_gz) {
      const bytes = traceBytes(ev.trace_gz);
      const download = h("button", { type: "button", "data-testid": "profile-download" }, "Download trace (.json.gz)");
      download.addEventListener("click", () => {
        const url = URL.createObjectURL(new Blob([bytes as BlobPart], { type: "application/gzip" }));
        const a = h("a", { href: url, download: "jaxplay-trace.json.gz" });
        a.click();
        setTimeout(() => URL.revokeObjectURL(url), 1000);
      });
      const perfetto = h("button", { type: "button", "data-testid": "profile-perfetto" }, "Open in Perfetto");
      perfetto.addEventListener("click", () => {
        const win = openWithoutOpener(window, PERFETTO_ORIGIN);
        if (!win) return;
        void gunzip(bytes).then((buffer) => handToPerfetto(win, window, buffer, "jaxplay profile"));
      });
      actions.append(download, " ", perfetto);
    }
    const passes = [...(ev.passes ?? [])].sort((a, b) => b.total_us - a.total_us);
    const passTotal = passes.reduce((s, p) => s + p.total_us, 0);
    return h(
      "section",
      { class: "profile-pipeline" },
      title ? h("h3", {}, title) : null,
      h("p", { class: "profile-summary", "data-testid": "profile-summary" }, `${ev.calls} calls profiled: ${ev.wall_us.toFixed(1)} µs wall, ${total.toFixed(1)} µs in ${ev.rows.length} instructions`),
      peaks ? h("p", { class: "pane-note" }, `peaks (${peaks.device_kind}): ${fmtRate(peaks.flops_per_s, "FLOP")}, ${fmtRate(peaks.bytes_per_s, "B")} — ${peaks.source}`) : null,
      actions,
      ...(ev.notes ?? []).map((n) => h("p", { class: "pane-note" }, n)),
      // the table first (what the pane is read for), the timeline after it
      h("table", { class: "memory profile" }, h("thead", {}, h("tr", {}, ...head.map((t) => h("th", {}, t)))), h("tbody", {}, ...rows)),
      timeline(ev, this.onLine),
      passes.length
        ? h(
            "details",
            { class: "profile-passes" },
            h("summary", {}, `compile: ${passes.length} HLO passes, ${(passTotal / 1000).toFixed(1)} ms; the slowest`),
            h("table", { class: "memory" }, h("tbody", {}, ...passes.slice(0, 30).map((p) => h("tr", {}, h("td", { class: "mono" }, p.pipeline), h("td", { class: "mono" }, p.pass), h("td", { class: "num" }, `${p.total_us.toFixed(0)} µs`))))),
          )
        : null,
    );
  }
}
