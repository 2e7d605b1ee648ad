// The layout of big graphs (thousands of nodes), in linear time per sweep: ELK's
// layered algorithm (graph/layout.ts), like dagre's and d3-dag's, puts one dummy node on
// every layer an edge crosses and minimises crossings over all of them, which took
// 60 s for an 801-node HLO (issue 32), and a grad jaxpr's residuals cross thousands of
// layers. Here, per level of the graph (a group's contents are laid out first and
// become one box):
//   1. layers by longest path from the sources (Kahn's order, cycles tolerated), then
//      every source (an input, a constant) moved down to just above its first reader;
//   2. order within a layer by barycentre of the neighbours' x, sweeping down then up
//      (four sweeps), each layer placed at its wanted x without overlaps (the mean of
//      a left-to-right and a right-to-left pass: both are valid, so is their mean);
//   3. edges as straight segments, bottom centre to top centre.
// No dummy nodes, so nothing grows with edge length: 12,000 equations lay out in tens
// of milliseconds (benchmarks/page/page_scale.py).
import { nodeSize, GROUP_HEAD } from "./sizes";
import type { GraphEdge, GraphNode } from "./model";
import type { EdgeSink, SceneNode } from "./scene";

const LAYER_GAP = 26;
const NODE_GAP = 14;
const PAD = 10;
const SWEEPS = 4;

export interface Box {
  width: number;
  height: number;
  /** writes this box's nodes and edges, moved by (dx, dy) */
  emit(dx: number, dy: number, nodes: SceneNode[], edges: EdgeSink): void;
}

interface Item {
  node: GraphNode;
  width: number;
  height: number;
  inner: Box | null;
  closed: boolean;
  x: number;
  layer: number;
}

/** Lays `nodes` (joined by `edges`) out; groups for which `collapsed` says true are one node. */
export function layered(nodes: GraphNode[], edges: GraphEdge[], collapsed: (n: GraphNode) => boolean): Box {
  const items: Item[] = nodes.map((node) => {
    const closed = node.kind === "group" && collapsed(node);
    if (node.kind === "group" && !closed) {
      const inner = layered(node.children ?? [], node.edges ?? [], collapsed);
      const min = nodeSize(node, false);
      return { node, inner, closed, width: Math.max(min.width, inner.width + 2 * PAD), height: inner.height + GROUP_HEAD + 6 + PAD, x: 0, layer: 0 };
    }
    return { node, inner: null, closed, ...nodeSize(node, closed), x: 0, layer: 0 };
  });
  const at = new Map(nodes.map((n, i) => [n.id, i]));
  const preds: number[][] = items.map(() => []);
  const succs: number[][] = items.map(() => []);
  const links: [number, number][] = [];
  for (const e of edges) {
    const a = at.get(e.from);
    const b = at.get(e.to);
    if (a === undefined || b === undefined || a === b) continue;
    preds[b]!.push(a);
    succs[a]!.push(b);
    links.push([a, b]);
  }
  assignLayers(items, preds, succs);
  const layers: number[][] = [];
  for (const [i, it] of items.entries()) (layers[it.layer] ??= []).push(i);
  for (const layer of layers) {
    if (!layer) continue;
    let run = 0;
    place(layer, items, layer.map((i) => (run += items[i]!.width + NODE_GAP) - items[i]!.width / 2));
  }
  const order = layers.filter((l) => l !== undefined);
  for (let s = 0; s < SWEEPS; s++) {
    const down = s % 2 === 0;
    const seq = down ? order.slice(1) : order.slice(0, -1).reverse();
    for (const layer of seq) {
      const want = layer.map((i) => {
        const near = down ? preds[i]! : succs[i]!;
        if (near.length === 0) return items[i]!.x + items[i]!.width / 2;
        let sum = 0;
        for (const j of near) sum += items[j]!.x + items[j]!.width / 2;
        return sum / near.length;
      });
      const byWant = layer.map((i, k) => [i, want[k]!] as const).sort((p, q) => p[1] - q[1]);
      layer.splice(0, layer.length, ...byWant.map((p) => p[0]));
      place(layer, items, byWant.map((p) => p[1]));
    }
  }
  // y: each layer as tall as its tallest node
  let minX = Infinity;
  let maxX = -Infinity;
  for (const it of items) {
    minX = Math.min(minX, it.x);
    maxX = Math.max(maxX, it.x + it.width);
  }
  if (items.length === 0) minX = maxX = 0;
  const ys: number[] = [];
  let y = PAD;
  for (const [k, layer] of order.entries()) {
    ys[k] = y;
    let tallest = 0;
    for (const i of layer) tallest = Math.max(tallest, items[i]!.height);
    y += tallest + LAYER_GAP;
  }
  const layerY = new Map<number, number>();
  for (const [k, layer] of order.entries()) layerY.set(items[layer[0]!]!.layer, ys[k]!);
  const shift = PAD - minX;
  const width = maxX - minX + 2 * PAD;
  const height = items.length ? y - LAYER_GAP + PAD : 2 * PAD;
  return {
    width,
    height,
    emit(dx, dy, out, sink) {
      const top = (it: Item) => dy + layerY.get(it.layer)!;
      const left = (it: Item) => dx + it.x + shift;
      for (const it of items) {
        const x = left(it);
        const yy = top(it);
        const n = it.node;
        out.push({ id: n.id, kind: n.kind, label: n.label, detail: n.detail, op: n.op, outLine: n.outLine, x, y: yy, width: it.width, height: it.height, collapsed: it.closed, open: it.inner !== null });
        it.inner?.emit(x + PAD, yy + GROUP_HEAD + 6, out, sink);
      }
      for (const [a, b] of links) {
        const s = items[a]!;
        const t = items[b]!;
        sink.add([
          { x: left(s) + s.width / 2, y: top(s) + s.height },
          { x: left(t) + t.width / 2, y: top(t) },
        ]);
      }
    },
  };
}

/** Layer of each item: longest path from a source, then sources moved down to just
 * above their first reader. What a cycle leaves (none in a jaxpr or an HLO graph)
 * goes below what it reads. */
function assignLayers(items: Item[], preds: number[][], succs: number[][]): void {
  const waiting = preds.map((p) => p.length);
  const queue: number[] = [];
  for (const [i, w] of waiting.entries()) if (w === 0) queue.push(i);
  const done = new Array<boolean>(items.length).fill(false);
  const visit = (i: number) => {
    done[i] = true;
    let layer = 0;
    for (const p of preds[i]!) if (done[p]) layer = Math.max(layer, items[p]!.layer + 1);
    items[i]!.layer = layer;
    for (const s of succs[i]!) if (--waiting[s]! === 0) queue.push(s);
  };
  for (let head = 0; head < queue.length; head++) visit(queue[head]!);
  for (let i = 0; i < items.length; i++) if (!done[i]) visit(i);
  for (const [i, it] of items.entries()) {
    if (preds[i]!.length > 0 || succs[i]!.length === 0) continue;
    let first = Infinity;
    for (const s of succs[i]!) first = Math.min(first, items[s]!.layer);
    it.layer = Math.max(it.layer, first - 1);
  }
}

/** Puts `layer`'s items, in this order, as near their wanted centres as they fit. */
function place(layer: number[], items: Item[], want: number[]): void {
  const n = layer.length;
  const right: number[] = new Array<number>(n);
  let edge = -Infinity;
  for (let k = 0; k < n; k++) {
    const it = items[layer[k]!]!;
    right[k] = Math.max(want[k]! - it.width / 2, edge);
    edge = right[k]! + it.width + NODE_GAP;
  }
  edge = Infinity;
  for (let k = n - 1; k >= 0; k--) {
    const it = items[layer[k]!]!;
    const left = Math.min(want[k]! - it.width / 2, edge - it.width);
    edge = left - NODE_GAP;
    it.x = (left + right[k]!) / 2;
  }
}
