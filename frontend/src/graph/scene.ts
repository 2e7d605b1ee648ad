// What the layout worker hands the page (graph/worker.ts): every drawn node with its
// box in the graph's own coordinates (groups' contents already moved inside their
// group), every edge as one run of points, and an index of all nodes (those inside
// collapsed groups too) for search and "zoom to a code line". Flat and small, so that
// receiving it costs the page's thread little: no nested GraphNode trees, edges as
// one Float32Array.
import type { GraphNode } from "./model";

export interface SceneNode {
  id: string;
  kind: GraphNode["kind"];
  label: string;
  detail: string;
  op: string | null;
  outLine: number | null;
  x: number;
  y: number;
  width: number;
  height: number;
  /** a group drawn as one node */
  collapsed: boolean;
  /** a group drawn open, its contents inside its box */
  open: boolean;
}

/** One node of the whole graph, drawn or inside a collapsed group. */
export interface IndexEntry {
  id: string;
  label: string;
  op: string | null;
  outLine: number | null;
  /** the groups that hold it, outermost first */
  groups: string[];
}

export interface Scene {
  width: number;
  height: number;
  /** groups before what they hold (drawing in this order puts contents on top) */
  nodes: SceneNode[];
  /** edge i's points are points[2*starts[i] .. 2*starts[i+1]) as x, y pairs */
  points: Float32Array;
  starts: Uint32Array;
  /** every node of the graph */
  index: IndexEntry[];
  /** "elk" (small graphs: ELK's layered layout, edges routed) or "layered" (big
   * graphs: graph/layered.ts, straight edges) */
  layout: "elk" | "layered";
  /** nodes in the whole graph, and drawn now */
  total: number;
  drawn: number;
  /** a note for the page (groups collapsed to keep it drawable), or "" */
  note: string;
}

/** Edges as collected while laying out, then packed into a Scene's arrays. */
export class EdgeSink {
  private coords: number[] = [];
  private starts: number[] = [0];

  add(points: { x: number; y: number }[], dx = 0, dy = 0): void {
    for (const p of points) this.coords.push(p.x + dx, p.y + dy);
    this.starts.push(this.coords.length / 2);
  }

  pack(): { points: Float32Array; starts: Uint32Array } {
    return { points: Float32Array.from(this.coords), starts: Uint32Array.from(this.starts) };
  }
}

/** Every node of `nodes` (groups' contents too), with the groups that hold it. */
export function indexOf(nodes: GraphNode[], groups: string[] = [], out: IndexEntry[] = []): IndexEntry[] {
  for (const n of nodes) {
    out.push({ id: n.id, label: n.label, op: n.op, outLine: n.outLine, groups });
    if (n.children) indexOf(n.children, [...groups, n.id], out);
  }
  return out;
}
