// Layout with elkjs (Eclipse Layout Kernel, layered algorithm), loaded on first use as
// its own chunk: the bundled build runs in the page's thread (no worker, no eval), so
// it works under the page's Content-Security-Policy. Groups are laid out inside out;
// a collapsed group is one node.
import type { ElkExtendedEdge, ElkNode } from "elkjs/lib/elk-api";
import type { Graph, GraphEdge, GraphNode } from "./model";

export interface Placed {
  node: GraphNode;
  x: number;
  y: number;
  width: number;
  height: number;
  collapsed: boolean;
  children: Placed[];
  edges: { points: { x: number; y: number }[] }[];
}

export interface Laid {
  width: number;
  height: number;
  nodes: Placed[];
  edges: { points: { x: number; y: number }[] }[];
}

const CHAR_W = 7.2;
const GROUP_HEAD = 26;

export function nodeSize(node: GraphNode, collapsed: boolean): { width: number; height: number } {
  const label = node.kind === "group" ? `${collapsed ? "▸" : "▾"} ${node.label}` : node.label;
  const chars = Math.max(label.length, Math.min(node.detail.length, 48));
  const width = Math.max(44, Math.ceil(chars * CHAR_W) + 18);
  if (node.kind === "input" || node.kind === "output") return { width, height: 34 };
  return { width, height: node.kind === "group" && !collapsed ? GROUP_HEAD : 38 };
}

let elkPromise: Promise<{ layout(graph: ElkNode): Promise<ElkNode> }> | null = null;
function elk() {
  elkPromise ??= import("elkjs/lib/elk.bundled.js").then((m) => {
    const ELK = (m as unknown as { default: new () => { layout(graph: ElkNode): Promise<ElkNode> } }).default;
    return new ELK();
  });
  return elkPromise;
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

function fromElk(elkNodes: ElkNode[], elkEdges: ElkExtendedEdge[], nodes: GraphNode[], collapsed: (n: GraphNode) => boolean): { nodes: Placed[]; edges: Placed["edges"] } {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const placed = elkNodes.map((e): Placed => {
    const node = byId.get(e.id)!;
    const closed = node.kind === "group" && collapsed(node);
    const inner = node.kind === "group" && !closed ? fromElk(e.children ?? [], (e.edges ?? []) as ElkExtendedEdge[], node.children ?? [], collapsed) : { nodes: [], edges: [] };
    return { node, x: e.x ?? 0, y: e.y ?? 0, width: e.width ?? 0, height: e.height ?? 0, collapsed: closed, children: inner.nodes, edges: inner.edges };
  });
  const edges = elkEdges.flatMap((e) => (e.sections ?? []).map((s) => ({ points: [s.startPoint, ...(s.bendPoints ?? []), s.endPoint] })));
  return { nodes: placed, edges };
}

/** Lays `graph` out, groups for which `collapsed` says true drawn as one node. */
export async function layoutGraph(graph: Graph, collapsed: (n: GraphNode) => boolean): Promise<Laid> {
  const engine = await elk();
  const root: ElkNode = { id: "root", layoutOptions: { ...ROOT_OPTIONS, "elk.padding": "[top=10,left=10,bottom=10,right=10]" }, ...toElk(graph.nodes, graph.edges, collapsed) };
  const out = await engine.layout(root);
  const { nodes, edges } = fromElk(out.children ?? [], (out.edges ?? []) as ElkExtendedEdge[], graph.nodes, collapsed);
  return { width: out.width ?? 0, height: out.height ?? 0, nodes, edges };
}
