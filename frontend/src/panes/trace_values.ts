// Values: the run's jaxpr stepped equation by equation on its own arguments (the
// `trace_values` output): a table of every equation's outputs (shape, min, max, mean,
// NaN and Inf counts), the rows holding a NaN or an Inf marked, and a jump to the
// first bad value's code line. The view model (traceTable, firstBad) is pure; the
// pane only draws it.
import { clear, h } from "../util/dom";
import type { EventOf } from "../connection/protocol";
import { PerPipelinePane } from "./pane";

type TraceEvent = EventOf<"trace_values">;
type TraceRow = TraceEvent["rows"][number];
type Stats = TraceRow["outputs"][number];

export const COLUMNS = ["#", "eqn", "primitive", "line", "pass", "iter", "output", "min", "max", "mean", "NaN", "Inf", "fed by"] as const;

/** One line of the table: a row's output (a row with several outputs has a line each). */
export interface TableLine {
  row: number;
  /** the first line of its row (the row's own cells are drawn on it) */
  head: boolean;
  depth: number;
  line: number | null;
  cells: string[];
  /** its output holds a NaN or an Inf */
  bad: boolean;
  /** its row made a NaN or an Inf its inputs did not hold */
  made: boolean;
}

export function fmtNumber(value: number | string | null | undefined): string {
  if (value === null || value === undefined) return "—";
  if (typeof value === "string") return value; // "nan", "inf", "-inf"
  if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
  return value.toPrecision(6).replace(/\.?0+(e|$)/, "$1");
}

function holdsBad(s: Stats): boolean {
  return (s.nan_count ?? 0) > 0 || (s.inf_count ?? 0) > 0;
}

function iterationText(row: TraceRow): string {
  if (row.iterations != null) return `×${row.iterations}`;
  return row.iteration != null ? String(row.iteration) : "";
}

/** The table's lines, in the rows' order. */
export function traceTable(ev: TraceEvent): TableLine[] {
  const lines: TableLine[] = [];
  ev.rows.forEach((row, n) => {
    const outputs: (Stats | null)[] = row.outputs.length ? row.outputs : [null];
    const fed = (row.inputs ?? []).filter((i): i is number => i !== null && i !== undefined);
    outputs.forEach((s, k) => {
      const head = k === 0;
      const own = head
        ? [String(n), row.eqn, row.primitive, row.line != null ? String(row.line) : "—", row.phase ?? "", iterationText(row)]
        : ["", "", "", "", "", ""];
      const more = head && row.outputs_total > row.outputs.length ? ` (+${row.outputs_total - row.outputs.length})` : "";
      const stats = s
        ? [`${s.dtype}[${s.shape.join(",")}]${more}`, fmtNumber(s.min), fmtNumber(s.max), fmtNumber(s.mean), fmtNumber(s.nan_count), fmtNumber(s.inf_count)]
        : ["", "", "", "", "", ""];
      lines.push({
        row: n,
        head,
        depth: row.depth,
        line: row.line ?? null,
        cells: [...own, ...stats, head ? fed.join(", ") : ""],
        bad: s !== null && holdsBad(s),
        made: (row.made ?? []).length > 0,
      });
    });
  });
  return lines;
}

/** Where a first bad value was found: its row, its code line, the rows that fed it. */
export interface BadValue {
  kind: "NaN" | "Inf";
  row: number;
  primitive: string;
  line: number | null;
  phase: string | null;
  fedBy: number[];
}

/** The first NaN and the first Inf, in the order they were made. */
export function firstBad(ev: TraceEvent): BadValue[] {
  const found: BadValue[] = [];
  for (const [kind, n] of [["NaN", ev.first_nan], ["Inf", ev.first_inf]] as const) {
    if (n === null || n === undefined || !ev.rows[n]) continue;
    const row = ev.rows[n]!;
    const fedBy = (row.inputs ?? []).filter((i): i is number => i !== null && i !== undefined);
    found.push({ kind, row: n, primitive: row.primitive, line: row.line ?? null, phase: row.phase ?? null, fedBy });
  }
  return found.sort((a, b) => a.row - b.row);
}

/** What the header says of a bad value. */
export function badText(b: BadValue): string {
  const at = b.line !== null ? ` at line ${b.line}` : "";
  const phase = b.phase ? ` (${b.phase} pass)` : "";
  const fed = b.fedBy.length ? `, fed by row${b.fedBy.length > 1 ? "s" : ""} ${b.fedBy.join(", ")}` : "";
  return `First ${b.kind}: row ${b.row}, ${b.primitive}${at}${phase}${fed}`;
}

export class TraceValuesPane extends PerPipelinePane<"trace_values"> {
  readonly consumes = ["trace_values"] as const;

  constructor(
    root: HTMLElement,
    /** selects a code line in the editor */
    private readonly onLine: (codeLine: number) => void,
    /** the pointer is on a row of this code line (null: off every row) */
    private readonly onHover: (codeLine: number | null) => void,
  ) {
    super(root);
    this.render();
  }

  badge(): string {
    const bad = [...this.events.values()].some((ev) => ev.first_bad != null);
    return bad ? "NaN" : "";
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No values stepped in this run: Stepper is off (turn it on under “What to compute”, or with the button above)." : "Waiting for the values…"));
      return;
    }
    for (const p of this.pipelines) {
      const ev = this.events.get(p);
      if (ev) this.root.append(this.section(ev, this.pipelines.length > 1 ? (this.labels[p] ?? p) : null));
    }
  }

  private section(ev: TraceEvent, title: string | null): HTMLElement {
    const trs = new Map<number, HTMLElement>();
    const body = h("tbody", {});
    for (const line of traceTable(ev)) {
      const cls = ["tv-row", line.bad ? "tv-bad" : "", line.made && line.head ? "tv-made" : "", line.head ? "" : "tv-more"].filter(Boolean).join(" ");
      const cells = line.cells.map((c, i) => {
        const td = h("td", { class: i === 2 ? "mono" : i >= 7 && i <= 11 ? "num" : "" }, c);
        if (i === 2 && line.head) td.style.paddingLeft = `${0.3 + line.depth}em`;
        return td;
      });
      const tr = h("tr", { class: cls, "data-row": line.row }, ...cells);
      if (line.line !== null) {
        const codeLine = line.line;
        tr.addEventListener("mouseenter", () => this.onHover(codeLine));
        tr.addEventListener("mouseleave", () => this.onHover(null));
        tr.addEventListener("click", () => this.onLine(codeLine));
      }
      if (line.head) trs.set(line.row, tr);
      body.append(tr);
    }
    const jumps = firstBad(ev).map((b) => {
      const jump = h("button", { type: "button", class: "tv-jump", "data-testid": `trace-first-${b.kind.toLowerCase()}` }, b.line !== null ? `Jump to line ${b.line}` : `Show row ${b.row}`);
      jump.addEventListener("click", () => {
        if (b.line !== null) this.onLine(b.line);
        const tr = trs.get(b.row);
        tr?.scrollIntoView({ block: "center" });
        tr?.classList.add("tv-flash");
      });
      // a heading: the first bad value is what the pane is read for
      return h("h3", { class: "tv-first" }, badText(b), " ", jump);
    });
    const summary = `${ev.rows.length} rows · ${ev.evaluated_steps} equations evaluated · ${ev.evaluated_bytes.toLocaleString()} bytes`;
    return h(
      "section",
      { class: "trace-values" },
      title ? h("h3", {}, title) : null,
      h("p", { class: "pane-note" }, summary),
      jumps.length ? jumps : h("p", { class: "tv-none" }, "No NaN or Inf in any equation's outputs."),
      ev.cut ? h("p", { class: "pane-note tv-cut" }, `Stepping stopped early (${ev.cut}).`) : null,
      ...(ev.notes ?? []).map((n) => h("p", { class: "pane-note" }, n)),
      h("table", { class: "trace-values" }, h("thead", {}, h("tr", {}, ...COLUMNS.map((c) => h("th", {}, c)))), body),
    );
  }
}
