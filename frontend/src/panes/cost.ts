// Cost and memory: XLA's own estimates, one column per pipeline, with bars.
import { clear, h } from "../util/dom";
import { fmtBytes, fmtCount } from "../util/format";
import type { EventOf, RunEvent } from "../connection/protocol";
import type { OutputPane } from "./pane";

type Cost = EventOf<"cost">;

interface Metric {
  label: string;
  help: string;
  get: (c: Cost) => number | null | undefined;
  fmt: (n: number | null | undefined) => string;
}

/** A figure as a number: XLA's NaN or infinity (sent as "nan", "inf") is no figure. */
function finite(v: number | string | null | undefined): number | null {
  return typeof v === "number" ? v : null;
}

const METRICS: Metric[] = [
  { label: "FLOPs", help: "floating-point operations", get: (c) => finite(c.flops), fmt: fmtCount },
  { label: "transcendentals", help: "exp, log, sin, tanh, …", get: (c) => finite(c.transcendentals), fmt: fmtCount },
  { label: "bytes accessed", help: "memory traffic", get: (c) => finite(c.bytes_accessed), fmt: fmtBytes },
  {
    label: "FLOPs per byte",
    help: "arithmetic intensity",
    get: (c) => {
      const flops = finite(c.flops);
      const bytes = finite(c.bytes_accessed);
      return flops != null && bytes ? flops / bytes : null;
    },
    fmt: (n) => (n == null ? "—" : n.toFixed(2)),
  },
];

const MEMORY = ["argument", "output", "temp", "alias", "generated_code", "peak"];

/** The figures before optimisation, asked for (the request's `cost_before`): they cost a
 * second conversion of the module to HLO, so runs make them only when asked. */
export interface CostBefore {
  /** the runs ask for them */
  on: () => boolean;
  /** ask for them or not; `on`: the program runs again to make them */
  set: (on: boolean) => void;
}

export class CostPane implements OutputPane {
  readonly consumes = ["cost"] as const;
  private costs = new Map<string, Cost>();
  private pipelines: string[] = ["main"];
  private labels: Record<string, string> = {};
  private ended = false;

  constructor(
    readonly root: HTMLElement,
    private readonly before?: CostBefore,
  ) {
    this.render();
  }

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.costs.clear();
    this.pipelines = pipelines;
    this.labels = labels;
    this.ended = false;
    this.render();
  }

  set(pipeline: string, cost: Cost): void {
    this.costs.set(pipeline, cost);
    this.render();
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type === "cost") this.set(pipeline, event);
  }

  end(): void {
    this.ended = true;
    this.render();
  }

  has(): boolean {
    return this.costs.size > 0;
  }

  private render(): void {
    clear(this.root);
    if (this.costs.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No cost figures: the run ended before compiling." : "Waiting for XLA's cost analysis…"));
      return;
    }
    const cols = this.pipelines;
    const compare = cols.length > 1;
    const head = h(
      "tr",
      {},
      h("th", { scope: "col" }, "XLA estimate"),
      ...cols.map((p, i) => h("th", { scope: "col", class: compare ? (i === 0 ? "pipe-a" : "pipe-b") : "" }, compare ? `${i === 0 ? "A" : "B"}: ${this.labels[p] ?? p}` : (this.labels[p] ?? p))),
    );
    const row = (label: string, help: string, values: (number | null | undefined)[], fmt: (n: number | null | undefined) => string, bars: boolean): HTMLElement => {
      const max = Math.max(0, ...values.map((v) => v ?? 0));
      return h(
        "tr",
        {},
        h("th", { scope: "row", title: help }, label),
        ...values.map((v, i) =>
          h(
            "td",
            { class: "num" },
            fmt(v),
            bars && max > 0 && v != null
              ? h("div", { class: `bar ${i === 0 ? "bar-a" : "bar-b"}`, style: `width:${Math.max(1, (100 * v) / max).toFixed(1)}%` })
              : null,
          ),
        ),
      );
    };
    const body = h("tbody", {});
    for (const m of METRICS) body.append(row(m.label, m.help, cols.map((p) => { const c = this.costs.get(p); return c ? m.get(c) : null; }), m.fmt, compare));
    // the same figures before XLA's optimisation passes (Lowered.cost_analysis)
    if (cols.some((p) => this.costs.get(p)?.before)) {
      body.append(h("tr", { class: "section" }, h("th", { scope: "rowgroup", colspan: cols.length + 1, title: "the module as lowered, before XLA's passes" }, "before optimisation")));
      for (const m of METRICS) {
        const values = cols.map((p) => {
          const before = this.costs.get(p)?.before;
          return before ? m.get(before as Cost) : null;
        });
        body.append(row(m.label, `${m.help}, before optimisation`, values, m.fmt, compare));
      }
    }
    body.append(h("tr", { class: "section" }, h("th", { scope: "rowgroup", colspan: cols.length + 1 }, "memory")));
    for (const key of MEMORY) {
      const values = cols.map((p) => this.costs.get(p)?.memory?.[key]);
      if (values.every((v) => v == null)) continue;
      body.append(row(key.replace("_", " "), `${key} bytes`, values, fmtBytes, true));
    }
    this.root.append(
      h("div", { class: "scroll-x", tabindex: 0 }, h("table", { class: "cost" }, h("thead", {}, head), body)),
      h("p", { class: "pane-note" }, "From XLA's cost and memory analysis of the compiled executable: estimates, per call."),
      ...[...new Set(cols.flatMap((p) => this.costs.get(p)?.notes ?? []))].map((n) => h("p", { class: "pane-note cost-partial" }, n)),
    );
    const offer = this.beforeOffer(cols.some((p) => this.costs.get(p)?.before));
    if (offer) this.root.append(offer);
  }

  /** The figures before optimisation: offered when this run has none, and a way back
   * to faster runs when the runs ask for them. */
  private beforeOffer(shown: boolean): HTMLElement | null {
    const before = this.before;
    if (!before) return null;
    if (!before.on()) {
      return h(
        "p",
        { class: "pane-note" },
        h("button", { type: "button", class: "linklike", "data-testid": "cost-before", onclick: () => before.set(true) }, "Show the figures before optimisation"),
        " (runs again: XLA converts the module to HLO a second time, 15–45 % of the compile's time, so runs make them only when asked)",
      );
    }
    if (!shown) return null;
    return h("p", { class: "pane-note" }, h("button", { type: "button", class: "linklike", "data-testid": "cost-before-off", onclick: () => (before.set(false), this.render()) }, "Stop making them"), " (faster runs from the next one)");
  }
}
