// The Graph tab's worker: reads the jaxpr or HLO text into a graph and lays it out,
// off the page's thread (issue 32: the HLO graph of a 100-layer MLP froze the page for
// 60 s). Loaded as a module worker from this origin (Vite bundles it; the CSP allows
// it with worker-src 'self'). One request at a time, in order; the page drops answers
// to requests it has since replaced.
import ELK from "elkjs/lib/elk.bundled.js";
import { buildScene, type Collapse } from "./build";
import { parseHlo } from "./hlo";
import { parseJaxpr } from "./jaxpr";
import type { Graph } from "./model";
import type { Scene } from "./scene";

export interface LayoutRequest extends Collapse {
  id: number;
  /** names the text: the same key and text are not read again */
  key: string;
  source: "jaxpr" | "hlo";
  text: string;
}

export type LayoutAnswer = { id: number; scene: Scene; parseMs: number; layoutMs: number } | { id: number; error: string };

// elk.bundled.js, loaded in a worker, takes the worker's messages for itself
// (`self.onmessage = dispatcher`): here it runs in this thread, called directly.
const scope = self as unknown as { onmessage: unknown; postMessage(m: unknown, t?: Transferable[]): void; addEventListener(t: "message", f: (e: MessageEvent<LayoutRequest>) => void): void };
scope.onmessage = null;
const elk = new (ELK as unknown as new () => { layout: import("./elk").ElkEngine["layout"] })();

const parsed = new Map<string, { text: string; graph: Graph | Error }>();

function graphOf(req: LayoutRequest): Graph | Error {
  const had = parsed.get(req.key);
  if (had && had.text === req.text) return had.graph;
  let graph: Graph | Error;
  try {
    graph = req.source === "jaxpr" ? parseJaxpr(req.text) : parseHlo(req.text);
  } catch (e) {
    graph = e instanceof Error ? e : new Error(String(e));
  }
  parsed.delete(req.key);
  parsed.set(req.key, { text: req.text, graph });
  while (parsed.size > 4) parsed.delete(parsed.keys().next().value!);
  return graph;
}

let chain: Promise<void> = Promise.resolve();
scope.addEventListener("message", (e) => {
  const req = e.data;
  chain = chain.then(async () => {
    const t0 = performance.now();
    const graph = graphOf(req);
    const t1 = performance.now();
    try {
      if (graph instanceof Error) throw graph;
      const scene = await buildScene(graph, req, elk);
      const answer: LayoutAnswer = { id: req.id, scene, parseMs: t1 - t0, layoutMs: performance.now() - t1 };
      scope.postMessage(answer, [scene.points.buffer, scene.starts.buffer]);
    } catch (err) {
      scope.postMessage({ id: req.id, error: err instanceof Error ? err.message : String(err) } satisfies LayoutAnswer);
    }
  });
});
