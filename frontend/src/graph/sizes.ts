// The size of a node's box, from its label and detail, for both layouts (graph/elk.ts,
// graph/layered.ts) and both renderers (the SVG and the canvas of panes/graph.ts).

import type { GraphNode } from "./model";

/** a monospace character at the graph's 12 px */
export const CHAR_W = 7.2;
/** an open group's title strip */
export const GROUP_HEAD = 26;
/** details longer than this are cut with "…" */
export const DETAIL_CHARS = 48;

export function nodeSize(node: GraphNode, collapsed: boolean): { width: number; height: number } {
  const label = node.kind === "group" ? `${collapsed ? "▸" : "▾"} ${node.label}` : node.label;
  const chars = Math.max(label.length, Math.min(node.detail.length, DETAIL_CHARS));
  const width = Math.max(44, Math.ceil(chars * CHAR_W) + 18);
  if (node.kind === "input" || node.kind === "output") return { width, height: 34 };
  return { width, height: node.kind === "group" && !collapsed ? GROUP_HEAD : 38 };
}
