// Kernels: each pallas_call of the run, its grid map (hover a grid cell: the block of
// each operand that grid point reads or writes), then the kernel's jaxpr, its
// Mosaic-TPU module and its Triton IR, each line linked to the code line it came from.
import { clear, h, svg } from "../util/dom";
import { blockLabel, blockLines, blockRect, cellOf, gridLayout, kernelLines, lineMap, operandSize, pointIndex, type GridOperand, type PallasKernel } from "./kernel-grid";
import { PerPipelinePane } from "./pane";

const GRID_WIDTH = 160;
const OPERAND_WIDTH = 180;

export class KernelsPane extends PerPipelinePane<"kernels"> {
  readonly consumes = ["kernels"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number) => void,
    private readonly hoverCode: (line: number | null) => void,
  ) {
    super(root);
    this.render();
  }

  badge(): string {
    const n = [...this.events.values()].reduce((sum, e) => sum + e.kernels.length, 0);
    return this.events.size ? String(n) : "";
  }

  codeLines(): Set<number> {
    return kernelLines([...this.events.values()].flatMap((e) => e.kernels));
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No kernels: turn on Kernels under “What to compute” and run code with a pallas_call." : "Waiting for the kernels…"));
      return;
    }
    for (const [pipeline, event] of this.events) {
      const section = h("section", { class: "kernels", "data-pipeline": pipeline });
      if (this.events.size > 1) section.append(h("h3", {}, this.labels[pipeline] ?? pipeline));
      for (const k of event.kernels) section.append(this.kernel(k));
      for (const n of event.notes ?? []) section.append(h("p", { class: "pane-note" }, n));
      this.root.append(section);
    }
  }

  private kernel(k: PallasKernel): HTMLElement {
    const line = k.line;
    const at = line != null ? h("button", { type: "button", class: "linklike", onclick: () => this.onLine(line) }, `line ${line}`) : null;
    const out = h("article", { class: "kernel" }, h("h4", {}, h("code", {}, k.name), " ", at));
    out.append(this.gridMap(k));
    out.append(this.text("kernel jaxpr", k.jaxpr, k.jaxpr_sources ?? []));
    if (k.mosaic) out.append(this.text(`Mosaic-TPU module (${k.mosaic_target ?? "TPU"})`, k.mosaic, k.mosaic_sources ?? []));
    if (k.triton) out.append(this.text(`Triton IR (${k.triton_target ?? "GPU"})`, k.triton, k.triton_sources ?? []));
    for (const n of k.notes ?? []) out.append(h("p", { class: "pane-note" }, n));
    return out;
  }

  private gridMap(k: PallasKernel): HTMLElement {
    const { rows, cols } = gridLayout(k.grid);
    const height = Math.max(24, Math.min(GRID_WIDTH, Math.round((GRID_WIDTH * rows) / Math.max(cols, 1))));
    const grid = svg("svg", { viewBox: `0 0 ${GRID_WIDTH} ${height}`, width: GRID_WIDTH, height, role: "img", class: "kernel-grid", "aria-label": `grid (${k.grid.join(", ")})` });
    const caption = h("figcaption", {}, h("strong", {}, `grid (${k.grid.join(", ")})`), ` ${k.points} point${k.points === 1 ? "" : "s"}`);
    const touched = h("p", { class: "kernel-touched mono" }, "Hover a grid cell: the blocks it reads and writes.");
    const drawings = k.operands.map((op) => this.operand(op));
    const cells: SVGElement[] = [];
    const show = (p: number | null): void => {
      cells.forEach((c, i) => c.classList.toggle("active", i === p));
      drawings.forEach((d, i) => {
        const rect = p === null ? null : blockRect(k.operands[i]!, p);
        d.highlight.setAttribute("visibility", rect ? "visible" : "hidden");
        if (rect) {
          d.highlight.setAttribute("x", String(rect.x * OPERAND_WIDTH));
          d.highlight.setAttribute("y", String(rect.y * d.height));
          d.highlight.setAttribute("width", String(rect.w * OPERAND_WIDTH));
          d.highlight.setAttribute("height", String(rect.h * d.height));
        }
      });
      touched.textContent = p === null ? "Hover a grid cell: the blocks it reads and writes." : `(${pointIndex(k.grid, p).join(", ")}): ${k.operands.map((op) => `${verb(op.kind)} ${blockLabel(op, p)}`).join("; ")}`;
    };
    for (let p = 0; p < k.points; p++) {
      const { row, col } = cellOf(k.grid, p);
      const w = GRID_WIDTH / cols;
      const hh = height / rows;
      const cell = svg("rect", { x: col * w, y: row * hh, width: w, height: hh, class: "kernel-cell", "data-point": p }, svg("title", {}, `(${pointIndex(k.grid, p).join(", ")})`));
      cell.addEventListener("mouseenter", () => show(p));
      cells.push(cell);
      grid.append(cell);
    }
    grid.addEventListener("mouseleave", () => show(null));
    const figure = h("div", { class: "kernel-map" }, h("figure", { class: "kernel-grid-figure" }, grid, caption), ...drawings.map((d) => d.figure));
    const notes = (k.grid_notes ?? []).map((n) => h("p", { class: "pane-note" }, n));
    return h("div", {}, figure, touched, ...notes);
  }

  private operand(op: GridOperand): { figure: HTMLElement; highlight: SVGElement; height: number } {
    const { rows, cols } = operandSize(op);
    const height = Math.max(24, Math.min(OPERAND_WIDTH, Math.round((OPERAND_WIDTH * rows) / Math.max(cols, 1))));
    const drawing = svg("svg", { viewBox: `0 0 ${OPERAND_WIDTH} ${height}`, width: OPERAND_WIDTH, height, role: "img", "aria-label": `${op.origin} in blocks of ${op.block_shape.join("×")}` });
    drawing.append(svg("rect", { x: 0, y: 0, width: OPERAND_WIDTH, height, class: `kernel-operand ${op.kind}` }));
    const { xs, ys } = blockLines(op);
    for (const x of xs) drawing.append(svg("line", { x1: x * OPERAND_WIDTH, x2: x * OPERAND_WIDTH, y1: 0, y2: height, class: "kernel-block-line" }));
    for (const y of ys) drawing.append(svg("line", { x1: 0, x2: OPERAND_WIDTH, y1: y * height, y2: y * height, class: "kernel-block-line" }));
    const highlight = svg("rect", { x: 0, y: 0, width: 0, height: 0, class: `kernel-block ${op.kind}`, visibility: "hidden" });
    drawing.append(highlight);
    const caption = h("figcaption", {}, h("strong", {}, `${verb(op.kind)} ${op.origin}`), " ", h("code", {}, `${op.dtype}[${op.shape.join(",")}]`), ` blocks of ${op.block_shape.join("×")}`);
    return { figure: h("figure", { class: "kernel-operand-figure", "data-origin": op.origin }, drawing, caption), highlight, height };
  }

  private text(title: string, text: string, sources: readonly { out_line: number; line: number }[]): HTMLElement {
    const lines = lineMap(sources);
    const pre = h("pre", { class: "mono kernel-text" });
    text.split("\n").forEach((t, i) => {
      const code = lines.get(i + 1);
      const span = h("span", code !== undefined ? { class: "linked", "data-line": code } : {}, t + "\n");
      if (code !== undefined) {
        span.addEventListener("mouseenter", () => this.hoverCode(code));
        span.addEventListener("mouseleave", () => this.hoverCode(null));
      }
      pre.append(span);
    });
    return h("details", { open: true }, h("summary", {}, title), pre);
  }
}

/** An operand's kind as what the kernel does with it ("out outputs[0]" read as nonsense). */
function verb(kind: string): string {
  return kind === "in" ? "reads" : kind === "out" ? "writes" : kind;
}
