// The layout of small graphs with elkjs (Eclipse Layout Kernel, layered algorithm:
// crossings minimised, edges routed around nodes), run in the layout worker
// (graph/worker.ts). It grows much faster than linearly (an 801-node HLO took 60 s,
// issue 32): graphs past ELK_LIMIT drawn nodes are laid out by graph/layered.ts.
// Groups are laid out inside out; a collapsed group is one node.
import type { ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api";
import type { Box } from "./layered";
import type { GraphEdge, GraphNode } from "./model";
import type { EdgeSink, SceneNode } from "./scene";
import { GROUP_HEAD, nodeSize } from "./sizes";

/** Past this many drawn nodes, graph/layered.ts lays the graph out (ELK took about
 * a second for 150 nodes on a loaded 2-core machine, and grows super-linearly). */
export const ELK_LIMIT = 200;

export interface ElkEngine {
  layout(graph: ElkNode): Promise<ElkNode>;
}

const ROOT_OPTIONS = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.layered.spacing.nodeNodeBetweenLayers": "26",
  "elk.spacing.nodeNode": "14",
  "elk.spacing.edgeNode": "10",
  "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
  "elk.edgeRouting": "POLYLINE",
};

function toElk(nodes: GraphNode[], edges: GraphEdge[], collapsed: (n: GraphNode) => boolean): { children: ElkNode[]; edges: ElkExtendedEdge[] } {
  const children = nodes.map((n): ElkNode => {
    const closed = n.kind === "group" && collapsed(n);
    if (n.kind === "group" && !closed) {
      const inner = toElk(n.children ?? [], n.edges ?? [], collapsed);
      const { width } = nodeSize(n, false);
      return {
        id: n.id,
        layoutOptions: { ...ROOT_OPTIONS, "elk.padding": `[top=${GROUP_HEAD + 6},left=10,bottom=10,right=10]`, "elk.nodeSize.minimum": `(${width}, ${GROUP_HEAD + 20})`, "elk.nodeSize.constraints": "MINIMUM_SIZE" },
        ...inner,
      };
    }
    return { id: n.id, ...nodeSize(n, closed) };
  });
  return { children, edges: edges.map((e, i) => ({ id: `${e.from}->${e.to}#${i}`, sources: [e.from], targets: [e.to] })) };
}

function emitLevel(elkNodes: ElkNode[], elkEdges: ElkExtendedEdge[], nodes: GraphNode[], collapsed: (n: GraphNode) => boolean, dx: number, dy: number, out: SceneNode[], sink: EdgeSink): void {
  for (const e of elkEdges) for (const s of e.sections ?? []) sink.add([s.startPoint, ...(s.bendPoints ?? []), s.endPoint], dx, dy);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  for (const e of elkNodes) {
    const n = byId.get(e.id)!;
    const closed = n.kind === "group" && collapsed(n);
    const open = n.kind === "group" && !closed;
    const x = (e.x ?? 0) + dx;
    const y = (e.y ?? 0) + dy;
    out.push({ id: n.id, kind: n.kind, label: n.label, detail: n.detail, op: n.op, outLine: n.outLine, x, y, width: e.width ?? 0, height: e.height ?? 0, collapsed: closed, open });
    if (open) emitLevel(e.children ?? [], (e.edges ?? []) as ElkExtendedEdge[], n.children ?? [], collapsed, x, y, out, sink);
  }
}

/** Lays `nodes` out with `engine`, groups for which `collapsed` says true drawn as one node. */
export async function elkLayout(engine: ElkEngine, nodes: GraphNode[], edges: GraphEdge[], collapsed: (n: GraphNode) => boolean): Promise<Box> {
  const root: ElkNode = { id: "root", layoutOptions: { ...ROOT_OPTIONS, "elk.padding": "[top=10,left=10,bottom=10,right=10]" }, ...toElk(nodes, edges, collapsed) };
  const laid = await engine.layout(root);
  return {
    width: laid.width ?? 0,
    height: laid.height ?? 0,
    emit: (dx, dy, out, sink) => emitLevel(laid.children ?? [], (laid.edges ?? []) as ElkExtendedEdge[], nodes, collapsed, dx, dy, out, sink),
  };
}
