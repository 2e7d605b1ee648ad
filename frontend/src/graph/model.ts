// What the graph view draws, whichever text it came from (a jaxpr, optimised HLO):
// nodes (operations, inputs, outputs) joined by data edges, and groups (a nested
// jaxpr of jit/cond/scan/while/custom rules, an HLO fusion or loop) that hold a graph
// of their own and can be collapsed to one node.

export interface GraphEdge {
  from: string;
  to: string;
}

export interface GraphNode {
  /** unique within the whole graph */
  id: string;
  kind: "op" | "input" | "output" | "group";
  /** the primitive or opcode (for ops and groups), the variable (for inputs) */
  label: string;
  /** types, or a short summary of the group */
  detail: string;
  /** the primitive (jaxpr) or opcode (HLO) for its documentation; null for inputs */
  op: string | null;
  /** the 1-based line of the text this node was read from (the text pane's line) */
  outLine: number | null;
  /** groups: what they hold */
  children?: GraphNode[];
  edges?: GraphEdge[];
}

export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
}

/** How many nodes a graph holds, groups' contents included. */
export function countNodes(nodes: GraphNode[]): number {
  let n = 0;
  for (const node of nodes) n += 1 + (node.children ? countNodes(node.children) : 0);
  return n;
}

/** How many nodes are drawn when groups for which `collapsed` says true are one node. */
export function drawnNodes(nodes: GraphNode[], collapsed: (n: GraphNode) => boolean): number {
  let n = 0;
  for (const node of nodes) n += 1 + (node.children && !collapsed(node) ? drawnNodes(node.children, collapsed) : 0);
  return n;
}

/** Line number (1-based) of each offset of `text`, by binary search over line starts. */
export function lineIndex(text: string): (offset: number) => number {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
  return (offset: number) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
}
