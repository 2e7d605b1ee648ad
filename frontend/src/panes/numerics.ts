// Numerics: the run's jaxpr against a float64 shadow (the `numerics` output): each
// output's error as run and op by op, the line where the most error is born, the jit
// comparison and the precision settings when the event has them, then a table of every
// equation with its error and the error it adds itself ("born"), hints under their
// rows. The view model (numericsTable, errorText) is pure; the pane only draws it.
import { clear, h } from "../util/dom";
import type { EventOf } from "../connection/protocol";
import { bornLevel } from "../editor/editor-numerics";
import { PerPipelinePane } from "./pane";

type NumericsEvent = EventOf<"numerics">;
type Row = NumericsEvent["rows"][number];
type Errors = NonNullable<Row["error"]>;

/** What "compare precision settings" runs (the request's numerics_precision). */
export const PRECISION_SETTINGS = ["default", "highest", "float64", "bfloat16", "tpu_default"] as const;

export const COLUMNS = ["#", "eqn", "primitive", "line", "iter", "dtype", "error", "ulp", "born", "born ulp"] as const;

export function fmt(value: number | string | null | undefined): string {
  if (value === null || value === undefined) return "—";
  if (typeof value === "string") return value;
  if (value === 0) return "0";
  return Math.abs(value) >= 1e-3 && Math.abs(value) < 1e5 ? String(Number(value.toPrecision(3))) : value.toExponential(2);
}

/** "4.6e-2 (7.8e+5 ulp)": a value's largest relative error and its ulps. */
export function errorText(e: Errors | null | undefined): string {
  return e ? `${fmt(e.max)} (${fmt(e.max_ulp)} ulp)` : "—";
}

/** "5: 0.0046 · 7: 1.2e-6": a setting's largest relative error per line ("" where the
 * setting was not stepped per line). */
export function settingLines(s: NonNullable<NumericsEvent["precision"]>[number]): string {
  return (s.lines ?? []).map((l) => `${l.line}: ${fmt(l.error)}`).join(" · ");
}

export interface TableRow {
  row: number;
  depth: number;
  line: number | null;
  cells: string[];
  /** the band's level of its born error (editor/editor-numerics.ts) */
  level: number;
  worst: boolean;
  hint: string | null;
}

export function numericsTable(ev: NumericsEvent): TableRow[] {
  return ev.rows.map((row, n) => ({
    row: n,
    depth: row.depth,
    line: row.line ?? null,
    cells: [
      String(n), row.eqn, row.primitive, row.line != null ? String(row.line) : "—",
      row.iterations != null ? `×${row.iterations}` : "", row.dtype ?? "",
      fmt(row.error?.max), fmt(row.error?.max_ulp), fmt(row.born?.max), fmt(row.born?.max_ulp),
    ],
    level: row.born ? bornLevel(row.born.max_ulp) : 0,
    worst: ev.worst_born === n,
    hint: row.hint?.text ?? (row.shadowed ? null : row.unshadowed ?? "not shadowed"),
  }));
}

export class NumericsPane extends PerPipelinePane<"numerics"> {
  readonly consumes = ["numerics"] as const;
  /** runs the state again with every precision setting (app/outputs.ts sets it) */
  onCompare: (() => void) | null = null;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number) => void,
    private readonly onHover: (codeLine: number | null) => void,
  ) {
    super(root);
    this.render();
  }

  badge(): string {
    const worst = [...this.events.values()].map((ev) => (ev.worst_born != null ? ev.rows[ev.worst_born]?.born?.max_ulp : null));
    return worst.some((u) => u != null && bornLevel(u) >= 2) ? "digits" : "";
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No numerics in this run: Numerics is off (turn it on under “What to compute”)." : "Waiting for the shadow…"));
      return;
    }
    for (const p of this.pipelines) {
      const ev = this.events.get(p);
      if (ev) this.root.append(this.section(ev, this.pipelines.length > 1 ? (this.labels[p] ?? p) : null));
    }
  }

  private section(ev: NumericsEvent, title: string | null): HTMLElement {
    const head = title ? h("h3", {}, title) : null;
    if (ev.refused) return h("section", { class: "numerics" }, head, h("p", { class: "pane-note nx-refused", "data-testid": "numerics-refused" }, ev.refused));
    const outputs = h(
      "table",
      { class: "numerics-outputs" },
      h("thead", {}, h("tr", {}, h("th", {}, "output"), h("th", {}, "as run"), h("th", {}, "op by op"))),
      h("tbody", {}, ...ev.outputs.map((o) => h("tr", {}, h("td", { class: "mono" }, `${o.path || "output"} ${o.dtype}[${o.shape.join(",")}]`), h("td", { class: "num" }, errorText(o.run)), h("td", { class: "num" }, errorText(o.eager))))),
    );
    const worst = ev.worst_born != null ? ev.rows[ev.worst_born] : undefined;
    let jump: HTMLElement | null = null;
    if (worst) {
      const button = h("button", { type: "button", class: "tv-jump", "data-testid": "numerics-worst" }, worst.line != null ? `Jump to line ${worst.line}` : `Show row ${ev.worst_born}`);
      button.addEventListener("click", () => {
        if (worst.line != null) this.onLine(worst.line);
        this.root.querySelector(`tr[data-row="${ev.worst_born}"]`)?.scrollIntoView({ block: "center" });
      });
      jump = h("h3", { class: "tv-first" }, `Most error born: row ${ev.worst_born}, ${worst.primitive}${worst.line != null ? ` at line ${worst.line}` : ""}: ${errorText(worst.born)} `, button);
    }
    const body = h("tbody", {});
    for (const line of numericsTable(ev)) {
      const cells = line.cells.map((c, i) => {
        const td = h("td", { class: i === 2 ? "mono" : i >= 6 ? "num" : "" }, c);
        if (i === 2) td.style.paddingLeft = `${0.3 + line.depth}em`;
        return td;
      });
      const tr = h("tr", { class: `nx-row nx-born-${line.level}${line.worst ? " nx-worst" : ""}`, "data-row": line.row }, ...cells);
      if (line.line !== null) {
        const codeLine = line.line;
        tr.addEventListener("mouseenter", () => this.onHover(codeLine));
        tr.addEventListener("mouseleave", () => this.onHover(null));
        tr.addEventListener("click", () => this.onLine(codeLine));
      }
      body.append(tr);
      if (line.hint) body.append(h("tr", { class: "nx-hint" }, h("td", {}), h("td", { colspan: COLUMNS.length - 1, "data-testid": "numerics-hint" }, line.hint)));
    }
    return h(
      "section",
      { class: "numerics" },
      head,
      h("p", { class: "pane-note" }, `${ev.rows.length} equations against a float64 shadow (${ev.backend}) · ${fmt(ev.shadow_ms)} ms`),
      outputs,
      jump,
      this.jit(ev),
      this.precision(ev),
      ev.cut ? h("p", { class: "pane-note" }, `The shadow stopped early (${ev.cut}).`) : null,
      ...(ev.notes ?? []).map((n) => h("p", { class: "pane-note" }, n)),
      h("table", { class: "numerics", "data-testid": "numerics-table" }, h("thead", {}, h("tr", {}, ...COLUMNS.map((c) => h("th", {}, c)))), body),
    );
  }

  private jit(ev: NumericsEvent): HTMLElement | null {
    const jit = ev.jit;
    if (!jit) return null;
    if (!jit.differs) return h("p", { class: "nx-jit", "data-testid": "numerics-jit" }, "jit: the compiled program gives what its equations give one by one.");
    const nearer = jit.closer === "same" ? "both as near float64" : jit.closer === "jit" ? "jit is nearer float64" : "op by op is nearer float64";
    const first = jit.first_eqn != null ? ` First differs at equation ${jit.first_eqn} (${jit.primitive ?? ""})${jit.line != null ? ` on line ${jit.line}` : ""}, found in ${jit.compiles} cut compiles.` : "";
    return h(
      "div",
      { class: "nx-jit", "data-testid": "numerics-jit" },
      h("p", {}, `jit changes the result (${nearer}).${first}`),
      ...(jit.options ?? []).map((o) => h("p", { class: "pane-note" }, `Recompiled with ${o.option}=${o.value}: ${o.removes === true ? "the difference goes away" : o.removes === false ? "it stays" : `did not compile${o.error ? ` (${o.error})` : ""}`}.`)),
      jit.cause ? h("p", { class: "nx-cause" }, `Cause: ${jit.cause}`) : null,
    );
  }

  private precision(ev: NumericsEvent): HTMLElement | null {
    if (!ev.precision?.length) {
      if (!this.onCompare) return null;
      const button = h("button", { type: "button", class: "linklike", "data-testid": "numerics-compare", title: "run again under default/highest matmul precision, float64, bfloat16 compute and a TPU's default (emulated here)" }, "Compare precision settings");
      button.addEventListener("click", () => this.onCompare?.());
      return h("p", { class: "nx-precision" }, button);
    }
    const names = ev.outputs.map((o) => o.path || "output");
    return h(
      "div",
      { class: "nx-precision", "data-testid": "numerics-precision" },
      h(
        "table",
        { class: "numerics-outputs" },
        h("thead", {}, h("tr", {}, h("th", {}, "setting"), ...names.map((n) => h("th", {}, n)), h("th", {}, "by line"))),
        h("tbody", {}, ...ev.precision.map((s) => h("tr", {}, h("td", {}, s.label + (s.emulated ? " (emulated)" : "")), ...(s.error ? [h("td", { colspan: Math.max(names.length, 1) }, s.error)] : s.outputs.map((o) => h("td", { class: "num" }, fmt(o?.norm)))), h("td", { class: "mono", "data-testid": "numerics-setting-lines" }, settingLines(s))))),
      ),
      ev.precision_note ? h("p", { class: "pane-note" }, ev.precision_note) : null,
    );
  }
}
