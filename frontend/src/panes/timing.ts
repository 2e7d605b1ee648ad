// Timing: a hand-rolled SVG chart (time per call; compile time) and the numbers.
// Eager vs compiled, compile vs run, pipeline vs pipeline.
import { clear, h, svg } from "../util/dom";
import { fmtMs } from "../util/format";
import type { RunEvent, TimingRowT } from "../connection/protocol";
import type { OutputPane } from "./pane";

const W = 680;
const LABEL_W = 190;
const VALUE_W = 190;
const ROW_H = 26;
const BAR_H = 16;

function rowClass(row: TimingRowT, pipelines: string[]): string {
  if (/\(eager\)/.test(row.label)) return "bar-eager";
  return (row.pipeline ?? "main") === pipelines[0] ? "bar-a" : "bar-b";
}

function chart(title: string, items: { label: string; value: number; cls: string; note: string; min?: number | null }[]): SVGElement {
  const max = Math.max(...items.map((i) => i.value));
  const positive = items.map((i) => i.value).filter((v) => v > 0);
  const min = Math.min(...positive);
  const log = positive.length > 1 && max / min > 30;
  const plotW = W - LABEL_W - VALUE_W;
  const x = (v: number): number => {
    if (v <= 0) return 0;
    if (!log) return (plotW * v) / max;
    const lo = Math.log10(min) - 0.5;
    const hi = Math.log10(max);
    return Math.max(2, (plotW * (Math.log10(v) - lo)) / (hi - lo));
  };
  const height = items.length * ROW_H + 30;
  const root = svg("svg", { viewBox: `0 0 ${W} ${height}`, width: "100%", role: "img", class: "chart", "aria-label": `${title}${log ? " (log scale)" : ""}` });
  root.append(svg("text", { x: 0, y: 14, class: "chart-title" }, `${title}${log ? " — log scale" : ""}`));
  items.forEach((item, i) => {
    const y = 24 + i * ROW_H;
    const label = item.label.length > 28 ? `${item.label.slice(0, 27)}…` : item.label;
    const g = svg("g", { class: "chart-row" });
    g.append(
      svg("title", {}, `${item.label}: ${item.note}`),
      svg("text", { x: LABEL_W - 8, y: y + BAR_H - 3, "text-anchor": "end", class: "chart-label" }, label),
      svg("rect", { x: LABEL_W, y, width: x(item.value).toFixed(1), height: BAR_H, rx: 2, class: `bar-rect ${item.cls}` }),
    );
    if (item.min != null && item.min > 0) {
      const mx = LABEL_W + x(item.min);
      g.append(svg("line", { x1: mx, x2: mx, y1: y - 2, y2: y + BAR_H + 2, class: "chart-min" }));
    }
    g.append(svg("text", { x: LABEL_W + x(item.value) + 6, y: y + BAR_H - 3, class: "chart-value" }, item.note));
    root.append(g);
  });
  return root;
}

export class TimingPane implements OutputPane {
  readonly consumes = ["timing"] as const;
  private rows: TimingRowT[] = [];
  private pipelines: string[] = ["main"];
  private ended = false;

  constructor(readonly root: HTMLElement) {
    this.render();
  }

  reset(pipelines: string[]): void {
    this.rows = [];
    this.pipelines = pipelines;
    this.ended = false;
    this.render();
  }

  set(rows: TimingRowT[]): void {
    this.rows = rows;
    this.render();
  }

  show(event: RunEvent): void {
    if (event.type === "timing") this.set(event.rows);
  }

  end(): void {
    this.ended = true;
    this.render();
  }

  has(): boolean {
    return this.rows.length > 0;
  }

  private render(): void {
    clear(this.root);
    if (this.rows.length === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No timings for this run." : "Waiting for timings (measured last; they take a second or two)…"));
      return;
    }
    const eager = this.rows.find((r) => /\(eager\)/.test(r.label))?.median_ms ?? null;
    const speedup = (r: TimingRowT): string =>
      eager && r.median_ms && !/\(eager\)/.test(r.label) ? `${(eager / r.median_ms).toFixed(1)}× eager` : "";
    const runRows = this.rows.filter((r) => r.median_ms != null);
    if (runRows.length) {
      this.root.append(
        chart(
          "time per call (median; tick = fastest)",
          runRows.map((r) => ({
            label: r.label,
            value: r.median_ms!,
            min: r.min_ms,
            cls: rowClass(r, this.pipelines),
            note: [fmtMs(r.median_ms), speedup(r)].filter(Boolean).join("  "),
          })),
        ),
      );
    }
    const compiled = this.rows.filter((r) => r.compile_ms != null);
    if (compiled.length) {
      this.root.append(
        chart(
          "compile time",
          compiled.map((r) => ({ label: r.label, value: r.compile_ms!, cls: rowClass(r, this.pipelines), note: fmtMs(r.compile_ms) })),
        ),
      );
    }
    const head = ["", "compile", "median", "min", "IQR", "runs", "vs eager"].map((t) => h("th", { scope: "col" }, t));
    const body = this.rows.map((r) =>
      h(
        "tr",
        {},
        h("th", { scope: "row", class: "mono" }, h("span", { class: `swatch ${rowClass(r, this.pipelines)}` }), r.label),
        h("td", { class: "num" }, fmtMs(r.compile_ms)),
        h("td", { class: "num" }, fmtMs(r.median_ms)),
        h("td", { class: "num" }, fmtMs(r.min_ms)),
        h("td", { class: "num" }, fmtMs(r.iqr_ms)),
        h("td", { class: "num" }, r.runs == null ? "—" : String(r.runs)),
        h("td", { class: "num" }, speedup(r) || "—"),
      ),
    );
    this.root.append(
      h("div", { class: "scroll-x", tabindex: 0 }, h("table", { class: "timing" }, h("thead", {}, h("tr", {}, head)), h("tbody", {}, body))),
      h(
        "p",
        { class: "pane-note" },
        "Per call, after warm-up, with block_until_ready; batches grown until they last 5 ms. Eager is the untransformed f. ",
        "Numbers from a shared machine vary: compare within a run.",
      ),
    );
  }
}
