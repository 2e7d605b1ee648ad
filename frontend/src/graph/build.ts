// From a parsed graph and the page's collapse choices to a Scene (graph/scene.ts): the
// layout worker's work (graph/worker.ts), kept free of the worker so that unit tests
// run it. Small graphs are laid out by ELK (edges routed), big ones by graph/layered.ts.
import { ELK_LIMIT, elkLayout, type ElkEngine } from "./elk";
import { layered, type Box } from "./layered";
import { countNodes, drawnNodes, type Graph, type GraphNode } from "./model";
import { EdgeSink, indexOf, type Scene, type SceneNode } from "./scene";

/** Groups holding more than this many nodes start collapsed. */
export const OPEN_LIMIT = 30;
/** Past this many drawn nodes the groups are drawn collapsed, and past it at the top
 * level the graph is not drawn (the text pane has it): a bound on the worker's memory
 * and the canvas's drawing, far above issue 32's 12,000-equation jaxpr. */
export const DRAW_LIMIT = 60_000;

export interface Collapse {
  /** "expand all" (false) or "collapse all" (true) pressed; null: neither */
  collapseAll: boolean | null;
  /** groups the user opened or closed since */
  toggled: string[];
}

/** Whether group `n` is drawn collapsed. */
export function collapser(c: Collapse): (n: GraphNode) => boolean {
  const toggled = new Set(c.toggled);
  return (n) => {
    const byDefault = c.collapseAll ?? countNodes(n.children ?? []) > OPEN_LIMIT;
    return toggled.has(n.id) ? !byDefault : byDefault;
  };
}

/** Lays `graph` out; `elk` for small graphs (null: graph/layered.ts for all). */
export async function buildScene(graph: Graph, c: Collapse, elk: ElkEngine | null): Promise<Scene> {
  let collapsed = collapser(c);
  let note = "";
  const total = countNodes(graph.nodes);
  if (drawnNodes(graph.nodes, collapsed) > DRAW_LIMIT) {
    collapsed = () => true;
    note = `${total} nodes: groups drawn collapsed to keep the page responsive.`;
  }
  const drawn = drawnNodes(graph.nodes, collapsed);
  if (drawn > DRAW_LIMIT) throw new Error(`${graph.nodes.length} nodes at the top level are too many to draw here (the limit is ${DRAW_LIMIT}); the text pane has them all`);
  const useElk = elk !== null && drawn <= ELK_LIMIT;
  const box: Box = useElk ? await elkLayout(elk, graph.nodes, graph.edges, collapsed) : layered(graph.nodes, graph.edges, collapsed);
  const nodes: SceneNode[] = [];
  const sink = new EdgeSink();
  box.emit(0, 0, nodes, sink);
  return { width: box.width, height: box.height, nodes, ...sink.pack(), index: indexOf(graph.nodes), layout: useElk ? "elk" : "layered", total, drawn, note };
}
