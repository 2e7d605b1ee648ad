// The page's side of the layout worker (graph/worker.ts): one worker, started when the
// Graph tab first lays a graph out; each answer goes to its request's promise.
import type { Collapse } from "./build";
import type { Scene } from "./scene";
import type { LayoutAnswer, LayoutRequest } from "./worker";

export interface Laid {
  scene: Scene;
  /** time in the worker: reading the text, laying out (ms) */
  parseMs: number;
  layoutMs: number;
}

let worker: Worker | null = null;
let next = 0;
const waiting = new Map<number, { resolve: (l: Laid) => void; reject: (e: Error) => void }>();

function start(): Worker {
  const w = new Worker(new URL("./worker.ts", import.meta.url), { type: "module", name: "jaxplay-graph-layout" });
  w.addEventListener("message", (e: MessageEvent<LayoutAnswer>) => {
    const a = e.data;
    const p = waiting.get(a.id);
    if (!p) return;
    waiting.delete(a.id);
    if ("error" in a) p.reject(new Error(a.error));
    else p.resolve({ scene: a.scene, parseMs: a.parseMs, layoutMs: a.layoutMs });
  });
  w.addEventListener("error", (e) => {
    // the worker could not start or threw outside a request: every waiting one fails
    for (const p of waiting.values()) p.reject(new Error(`the layout worker failed: ${e.message || "could not load"}`));
    waiting.clear();
    worker = null;
  });
  return w;
}

/** Starts the worker (and its ELK) ahead of the first layout: the Graph pane calls it
 * when it is made, so the tab's first graph does not wait for the worker's start. */
export function warmUp(): void {
  worker ??= start();
}

/** Reads `text` (a jaxpr or HLO) and lays it out in the worker. */
export function layOut(key: string, source: "jaxpr" | "hlo", text: string, c: Collapse): Promise<Laid> {
  worker ??= start();
  const id = ++next;
  const req: LayoutRequest = { id, key, source, text, collapseAll: c.collapseAll, toggled: c.toggled };
  const answer = new Promise<Laid>((resolve, reject) => waiting.set(id, { resolve, reject }));
  worker.postMessage(req);
  return answer;
}
