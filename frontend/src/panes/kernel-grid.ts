// The kernels pane's page logic (issue 24): a pallas_call's grid laid out as rows and
// columns of cells, and for one grid point the block of each operand it reads or
// writes, as a rectangle over the operand's last two dimensions (fractions of the
// whole). Pure: no DOM, unit-tested (test/kernels.test.ts).
import type { EventOf } from "../connection/protocol";

export type KernelsEvent = EventOf<"kernels">;
export type PallasKernel = KernelsEvent["kernels"][number];
export type GridOperand = PallasKernel["operands"][number];

/** A rectangle in fractions of a drawing (0..1 each). */
export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** How the grid is drawn: its first dimension as rows, the rest (row-major) as
 * columns; a grid of none is one cell. */
export function gridLayout(grid: readonly number[]): { rows: number; cols: number } {
  const rows = grid.length >= 2 ? grid[0]! : 1;
  const cols = grid.length >= 2 ? grid.slice(1).reduce((a, b) => a * b, 1) : (grid[0] ?? 1);
  return { rows, cols };
}

/** Grid point `p` (row-major, as the event's `starts`) as its index per dimension. */
export function pointIndex(grid: readonly number[], p: number): number[] {
  const index: number[] = [];
  let rest = p;
  for (let d = grid.length - 1; d >= 0; d--) {
    index.unshift(rest % grid[d]!);
    rest = Math.floor(rest / grid[d]!);
  }
  return index;
}

/** The cell of grid point `p` in `gridLayout`'s rows and columns. */
export function cellOf(grid: readonly number[], p: number): { row: number; col: number } {
  const { cols } = gridLayout(grid);
  return { row: Math.floor(p / cols), col: p % cols };
}

/** The dimensions an operand is drawn over: its last two (one: a single row). */
function drawnDims(shape: readonly number[]): [number | null, number | null] {
  if (shape.length === 0) return [null, null];
  if (shape.length === 1) return [null, 0];
  return [shape.length - 2, shape.length - 1];
}

/** The operand's drawing in rows and columns (its last two dimensions' sizes). */
export function operandSize(op: GridOperand): { rows: number; cols: number } {
  const [r, c] = drawnDims(op.shape);
  return { rows: r === null ? 1 : op.shape[r]!, cols: c === null ? 1 : op.shape[c]! };
}

/** The block grid point `p` touches in operand `op`, as fractions of its drawing
 * (clipped to the array: a block may hang over its edge); null where the event
 * gives no block for that point. */
export function blockRect(op: GridOperand, p: number): Rect | null {
  const start = op.starts?.[p];
  if (!start) return null;
  const [r, c] = drawnDims(op.shape);
  const span = (d: number | null): [number, number] => {
    if (d === null) return [0, 1];
    const size = op.shape[d]!;
    if (size === 0) return [0, 1];
    const from = Math.min(start[d]!, size);
    const to = Math.min(start[d]! + op.block_shape[d]!, size);
    return [from / size, (to - from) / size];
  };
  const [y, h] = span(r);
  const [x, w] = span(c);
  return { x, y, w, h };
}

/** The block lines of an operand's drawing: where its blocks start along each axis. */
export function blockLines(op: GridOperand): { xs: number[]; ys: number[] } {
  const [r, c] = drawnDims(op.shape);
  const cuts = (d: number | null): number[] => {
    if (d === null) return [];
    const size = op.shape[d]!;
    const step = op.block_shape[d]!;
    const out: number[] = [];
    if (step <= 0 || size <= 0) return out;
    for (let at = step; at < size && out.length < 256; at += step) out.push(at / size);
    return out;
  };
  return { xs: cuts(c), ys: cuts(r) };
}

/** `args[0][16:32, 0:256]`: the block grid point `p` touches, in element ranges. */
export function blockLabel(op: GridOperand, p: number): string {
  const start = op.starts?.[p];
  if (!start) return `${op.origin}: not evaluated`;
  return `${op.origin}[${start.map((s, d) => `${s}:${s + op.block_shape[d]!}`).join(", ")}]`;
}

/** Output line -> code line, from a text's source map. */
/** The code lines the Kernels pane links: each kernel's and its texts' lines. */
export function kernelLines(kernels: readonly PallasKernel[]): Set<number> {
  const lines = new Set<number>();
  for (const k of kernels) {
    if (k.line != null) lines.add(k.line);
    for (const s of [...(k.jaxpr_sources ?? []), ...(k.mosaic_sources ?? []), ...(k.triton_sources ?? [])]) lines.add(s.line);
  }
  return lines;
}

export function lineMap(sources: readonly { out_line: number; line: number }[]): Map<number, number> {
  return new Map(sources.map((s) => [s.out_line, s.line]));
}
